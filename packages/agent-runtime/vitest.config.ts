import { engramVitestConfig } from '../../vitest.shared.js';

// Each file in its own process, fast loop too: sandbox/fork-sandbox.test.ts declares a write jail on the
// shared `allowAll` policy itself (withWriteJail assigns onto the function), which a later file in the same
// process would inherit.
export default engramVitestConfig();
