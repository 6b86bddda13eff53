import { engramVitestConfig } from '../../vitest.shared.js';

export default engramVitestConfig(import.meta.dirname, { shareProcess: 'always' });
