import { engramVitestConfig } from '../../vitest.shared.js';

// PostgreSQL too: the extraction, coalescing and crash-recovery tests run on both queue engines. Both tiers run
// the files in one process (modules loaded once: 222 s → 157 s of CPU in `npm test`), except logger-otlp.test.ts
// (`ISOLATED_SUITES`): it starts this process's OpenTelemetry SDK, which stays the active telemetry after its
// shutdown.
export default engramVitestConfig(import.meta.dirname, {
  redis: true,
  postgres: true,
  shareProcess: 'always',
});
