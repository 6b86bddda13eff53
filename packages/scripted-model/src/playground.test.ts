import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelServer, startModelServer } from './model-server.js';
import { PLAYGROUND_LABEL, playgroundMemory, playgroundResponder } from './playground.js';

// The keyless playground model through the real SDK: statements become memories of the right type, questions
// do not, the recall selector picks memories sharing a word with the query, and answers quote recalled memory.

let server: ModelServer;
let client: Anthropic;
beforeAll(async () => {
  server = await startModelServer({ fallback: playgroundResponder({ recallWaitMs: 10 }) });
  client = new Anthropic({ apiKey: 'playground', baseURL: server.url, maxRetries: 0 });
});
afterAll(() => server.close());

describe('playground model', () => {
  it('classifies statements and leaves questions alone', () => {
    expect(playgroundMemory('Always use pnpm here, never npm.')?.file).toBe(
      'feedback_always_use_pnpm_here.md',
    );
    expect(playgroundMemory("I'm a Go developer on the payments team")?.content).toContain('type: user');
    expect(playgroundMemory('We use Postgres 16 in this project')?.content).toContain('type: project');
    expect(playgroundMemory('Should I use pnpm?')).toBeUndefined();
    expect(playgroundMemory('hello there')).toBeUndefined();
  });

  it('writes the memory with the Write tool into the directory named in the fork system prompt', async () => {
    const res = await client.messages.create({
      model: 'm',
      max_tokens: 100,
      system: 'You have a persistent, file-based memory at `/mem/dir/`. The directory already exists.',
      messages: [
        { role: 'user', content: 'Never deploy on Fridays.' },
        { role: 'assistant', content: 'Ok.' },
        { role: 'user', content: 'You are now the memory extraction subagent. Read the messages above.' },
      ],
    });
    const write = res.content.find((b) => b.type === 'tool_use');
    expect(write).toMatchObject({
      name: 'Write',
      input: { file_path: '/mem/dir/feedback_never_deploy_fridays.md' },
    });
    expect((write as { input: { content: string } }).input.content).toContain('Never deploy on Fridays.');
  });

  it('selects memories sharing a word with the query, and answers with what was recalled', async () => {
    const selected = await client.messages.create({
      model: 'm',
      max_tokens: 100,
      messages: [
        {
          role: 'user',
          content:
            'Query: how do I deploy?\n\nAvailable memories:\n- [feedback] feedback_never_deploy_fridays.md (2026-11-30T00:00:00.000Z): Never deploy on Fridays.\n- [user] user_role.md (2026-11-30T00:00:00.000Z): Go developer',
        },
      ],
      output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
    } as never);
    expect(JSON.parse((selected.content[0] as { text: string }).text)).toEqual({
      selected_memories: ['feedback_never_deploy_fridays.md'],
    });
    const answer = await client.messages.create({
      model: 'm',
      max_tokens: 100,
      messages: [
        {
          role: 'user',
          content:
            'Can I ship today?\n<system-reminder>\nMemory (saved today): /mem/dir/feedback_x.md:\n\n---\nname: x\n---\nNever deploy on Fridays.\n</system-reminder>',
        },
      ],
    });
    const textOut = (answer.content[0] as { text: string }).text;
    expect(textOut.startsWith(PLAYGROUND_LABEL)).toBe(true);
    expect(textOut).toContain('From memory: Never deploy on Fridays.');
  });

  it('does not wait for the selector timeout when the selector answered before the prompt arrived', async () => {
    // A responder whose bound is far longer than the test's own timeout: waiting for it fails the test.
    const slow = await startModelServer({ fallback: playgroundResponder({ recallWaitMs: 60_000 }) });
    try {
      const sdk = new Anthropic({ apiKey: 'playground', baseURL: slow.url, maxRetries: 0 });
      const prompt = 'How do we deploy the payments service?';
      await sdk.messages.create({
        model: 'm',
        max_tokens: 100,
        messages: [
          {
            role: 'user',
            content: `Query: ${prompt}\n\nAvailable memories:\n- [feedback] feedback_deploy.md (2026-11-30T00:00:00.000Z): Never deploy on Fridays.`,
          },
        ],
        output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
      } as never);
      const turn = await sdk.messages.create({
        model: 'm',
        max_tokens: 100,
        tools: [{ name: 'Glob', description: 'glob', input_schema: { type: 'object' } }],
        messages: [
          {
            role: 'user',
            content: `<system-reminder>\n# MEMORY.md\n- [Deploy](feedback_deploy.md) — never on Fridays\n</system-reminder>\n${prompt}`,
          },
        ],
      });
      expect(turn.content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'Glob' });
    } finally {
      await slow.close();
    }
  }, 20_000);

  it('wakes a waiting prompt when its selector answers after it', async () => {
    const slow = await startModelServer({ fallback: playgroundResponder({ recallWaitMs: 60_000 }) });
    try {
      const sdk = new Anthropic({ apiKey: 'playground', baseURL: slow.url, maxRetries: 0 });
      const prompt = 'Which database do we use?';
      const turn = sdk.messages.create({
        model: 'm',
        max_tokens: 100,
        tools: [{ name: 'Glob', description: 'glob', input_schema: { type: 'object' } }],
        messages: [
          {
            role: 'user',
            content: `<system-reminder>\n- [DB](project_db.md) — Postgres\n</system-reminder>\n${prompt}`,
          },
        ],
      });
      // The turn is waiting; the selector's answer for the same prompt releases it.
      await new Promise((resolve) => setTimeout(resolve, 200));
      await sdk.messages.create({
        model: 'm',
        max_tokens: 100,
        messages: [
          {
            role: 'user',
            content: `Query: ${prompt}\n\nAvailable memories:\n- [project] project_db.md (2026-11-30T00:00:00.000Z): Postgres`,
          },
        ],
        output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
      } as never);
      expect((await turn).content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'Glob' });
    } finally {
      await slow.close();
    }
  }, 20_000);
});
