import { engramVitestConfig } from '../../vitest.shared.js';

// PostgreSQL too: the extraction, coalescing and crash-recovery tests run on both queue engines. The fast loop
// runs the files in one process, but logger-otlp.test.ts apart: it starts this process's OpenTelemetry SDK,
// which stays the active telemetry after its shutdown.
export default engramVitestConfig({
  redis: true,
  postgres: true,
  shareProcess: 'fast',
  isolatedFiles: ['src/logger-otlp.test.ts'],
});
