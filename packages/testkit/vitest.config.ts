import { engramVitestConfig } from '../../vitest.shared.js';

export default engramVitestConfig(import.meta.dirname, { redis: true, shareProcess: 'always' });
