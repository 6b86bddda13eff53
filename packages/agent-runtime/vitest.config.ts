import { engramVitestConfig } from '../../vitest.shared.js';

// Both tiers run this package's files in one process (modules loaded once: the fast loop 52 s → 31 s here,
// `npm test` 204 → 165 s of CPU); no file leaves process-wide state behind since the sandbox became an explicit
// argument (sandbox/boundary.ts).
export default engramVitestConfig(import.meta.dirname, { shareProcess: 'always' });
