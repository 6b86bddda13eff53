import { promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { query } from '@anthropic-ai/claude-agent-sdk';
import { startModelServer } from '@engram/scripted-model/model-server';
import { textReply } from '@engram/scripted-model/replies';

const server = await startModelServer({ fallback: (r) => textReply('ok from scripted') });
const home = mkdtempSync(join(tmpdir(), 'sdk-scratch-home-'));
const repo = mkdtempSync(join(tmpdir(), 'sdk-scratch-repo-'));
await fs.mkdir(join(repo, '.git'));
const events: string[] = [];
const started = Date.now();
const q = query({
  prompt: 'Remember that we deploy to region ams.',
  options: {
    cwd: repo,
    env: {
      PATH: process.env.PATH,
      HOME: home,
      CLAUDE_CONFIG_DIR: home,
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: 'test',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    },
    settingSources: [],
    hooks: {
      Stop: [
        {
          hooks: [
            async (input) => {
              events.push(`Stop ${JSON.stringify(input)}`);
              return {};
            },
          ],
        },
      ],
      UserPromptSubmit: [
        {
          hooks: [
            async (input) => {
              events.push(`UPS ${JSON.stringify(input)}`);
              return {
                hookSpecificOutput: { hookEventName: 'UserPromptSubmit', additionalContext: 'CTX-MARKER' },
              };
            },
          ],
        },
      ],
    },
    stderr: (d) => process.stderr.write(`[cc] ${d}`),
  },
});
for await (const m of q)
  console.log('msg', m.type, (m as any).subtype ?? '', JSON.stringify(m).slice(0, 200));
console.log('took', Date.now() - started);
console.log(events.join('\n'));
for (const r of server.requests) console.log('REQ', r.path, JSON.stringify(r.body).slice(0, 300));
const ctx = server.requests.some((r) => JSON.stringify(r.body).includes('CTX-MARKER'));
console.log('ctx in request', ctx);
await server.close();
