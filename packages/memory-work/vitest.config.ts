import { engramVitestConfig } from '../../vitest.shared.js';

export default engramVitestConfig({ redis: true, postgres: true, shareProcess: 'always' });
