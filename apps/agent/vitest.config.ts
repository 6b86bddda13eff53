import { mergeConfig } from 'vitest/config';
import { engramVitestConfig } from '../../vitest.shared.js';

// eventsource-parser (under the MCP SDK's HTTP client) publishes a `source` export condition pointing at its
// TypeScript; inlining the SDK and it lets Vite compile it instead of Node loading a .ts file.
export default mergeConfig(
  engramVitestConfig(import.meta.dirname, { redis: true, postgres: true, shareProcess: 'fast' }),
  {
    test: { server: { deps: { inline: [/@modelcontextprotocol\/sdk/, 'eventsource-parser'] } } },
  },
);
