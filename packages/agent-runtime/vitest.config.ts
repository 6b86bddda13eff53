import { engramVitestConfig } from '../../vitest.shared.js';

// The fast loop runs this package's files in one process (modules loaded once: 52 s → 31 s here); no file
// leaves process-wide state behind since the sandbox became an explicit argument (sandbox/boundary.ts).
// `npm test` keeps a process per file.
export default engramVitestConfig({ shareProcess: 'fast' });
