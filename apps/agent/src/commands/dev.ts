import { redactUrl } from '@engram/queue/backend-config';
import type { AgentConfig } from '../config.js';
import { removeDevStack, writeDevStack } from '../dev-stack.js';
import { startLocalStack } from '../stack/local-stack.js';
import { EXIT, type Output } from './output.js';
import { waitForSignal } from './workers.js';

// `engram dev`: everything a laptop needs, in one process, until Ctrl-C.

export async function devCommand(config: AgentConfig, opts: { port?: number }, io: Output): Promise<number> {
  const stack = await startLocalStack({
    engramHome: config.engramHome,
    configured: config.backend,
    namespace: config.namespace,
    workerEnv: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' },
    ...(opts.port !== undefined ? { httpPort: opts.port } : {}),
  });
  const http = stack.service.http;
  await writeDevStack(config.engramHome, {
    pid: process.pid,
    backend: { kind: stack.backend.kind, url: stack.backend.url },
    ...(http ? { dashboard: `${http.url}/dashboard` } : {}),
    startedAt: new Date().toISOString(),
  });
  const engine =
    stack.backend.kind === 'postgres' ? 'BullMQ on embedded PostgreSQL' : `BullMQ on Redis (${stack.origin})`;
  io.out(
    [
      'Engram dev stack is running.',
      `  queue engine : ${engine} — ${redactUrl(stack.backend.url)}`,
      `  workers      : ${[...stack.service.workers.keys()].join(', ')}`,
      ...(http
        ? [
            `  dashboard    : ${http.url}/dashboard`,
            `  metrics      : ${http.url}/metrics`,
            `  health       : ${http.url}/readyz`,
          ]
        : []),
      `  ENGRAM_HOME  : ${config.engramHome}`,
      ...stack.notes.map((n) => `  note         : ${n}`),
      '',
      'In another terminal: engram run -p "…" (it finds this stack automatically), or `engram chat`.',
      'Press Ctrl-C to stop.',
    ].join('\n'),
  );
  const signal = await waitForSignal();
  io.err(`engram dev: ${signal}, stopping…`);
  removeDevStack(config.engramHome);
  await stack.stop();
  return EXIT.ok;
}
