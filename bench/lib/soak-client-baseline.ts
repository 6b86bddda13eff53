// The extract phase's baseline, measured in the same run: Engram's model client alone (the one the workers use,
// the real @anthropic-ai/sdk, streaming) in a process of its own, keeping SOAK_BASELINE_CONCURRENCY requests in
// flight against the same scripted model server until SOAK_BASELINE_CALLS replies came back. The requests
// carry the extraction instruction and the agent's tool definitions, so the server answers them as it answers
// a fork (after the extract model latency). Prints one JSON line: { calls, seconds, cpuMs }.
import { createModelClient } from '@engram/agent-runtime/model/client';
import { defaultTools, toolDefinitions } from '@engram/agent-runtime/tools/registry';

const url = process.argv[2]!;
const CONCURRENCY = Number(process.env.SOAK_BASELINE_CONCURRENCY ?? 100);
const CALLS = Number(process.env.SOAK_BASELINE_CALLS ?? 600);
const EXTRACTION = 'You are now the memory extraction subagent';

const client = createModelClient({ apiKey: 'soak', baseURL: url, maxRetries: 2 });
const tools = toolDefinitions(defaultTools());
const call = () =>
  client.send({
    model: 'claude-sonnet-5-5',
    system: [{ type: 'text', text: 'You are a coding agent. Be brief.' }],
    tools,
    maxTokens: 8192,
    messages: [
      { role: 'user', content: 'session' },
      { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
      { role: 'user', content: `${EXTRACTION}. Analyze the most recent messages above.` },
    ],
  });

// Warm the connection pool as a running worker would have it.
await Promise.all(Array.from({ length: CONCURRENCY }, call));
let started = 0;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (started < CALLS) {
      started++;
      await call();
    }
  }),
);
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
process.stdout.write(`${JSON.stringify({ calls: CALLS, seconds, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`);
process.exit(0);
