import { engramVitestConfig } from '../../vitest.shared.js';

// Pure unit suites (no Redis, no process-wide state): one process loads the modules for every file.
export default engramVitestConfig(import.meta.dirname, { shareProcess: 'always' });
