// Values the test harness provides to every test through `inject()` (see packages/testkit/src/redis-global-setup.ts).
import 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Which services the global setup starts; set by engramVitestConfig from its options. */
    engramServices: { redis: boolean; postgres: boolean };
    redisUrl: string;
    redisSource: string;
    /** Only when the package's vitest config asks for PostgreSQL (engramVitestConfig({ postgres: true })). */
    postgresUrl: string;
    postgresSource: string;
  }
}
