// Values the test harness provides to every test through `inject()` (see packages/testkit/src/redis-global-setup.ts).
import 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    redisSource: string;
  }
}
