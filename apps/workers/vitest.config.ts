import { engramVitestConfig } from '../../vitest.shared.js';

// PostgreSQL too: the extraction, coalescing and crash-recovery tests run on both queue engines.
export default engramVitestConfig(import.meta.dirname, { redis: true, postgres: true });
