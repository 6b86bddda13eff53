import { engramVitestConfig } from '../../vitest.shared.js';

export default engramVitestConfig({ postgres: true, shareProcess: 'always' });
