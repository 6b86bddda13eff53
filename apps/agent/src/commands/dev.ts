import { redactUrl } from '@engram/queue/backend-config';
import { type ModelServer, startModelServer } from '@engram/scripted-model/model-server';
import { PLAYGROUND_LABEL, playgroundResponder } from '@engram/scripted-model/playground';
import type { AgentConfig } from '../config.js';
import { claimDevStack, readDevPorts, releaseDevStack, writeDevPorts, writeDevStack } from '../dev-stack.js';
import { portFree, startLocalStack } from '../stack/local-stack.js';
import { EXIT, type Output } from './output.js';
import { waitForSignal } from './workers.js';

// `engram dev`: everything a laptop needs, in one process, until Ctrl-C. One stack per ENGRAM_HOME: the
// process that created ENGRAM_HOME/dev-stack.json owns it; a second `engram dev` on the same home refuses.

export interface DevOptions {
  port?: number;
  /** Start the keyless playground model and point the workers (and agents without a key) at it. */
  scriptedModel?: boolean;
}

/** The line scripts and tests wait for. */
export const READY_LINE = 'Engram dev stack is running.';

export async function devCommand(config: AgentConfig, opts: DevOptions, io: Output): Promise<number> {
  claimDevStack(config.engramHome);
  let model: ModelServer | undefined;
  let stack: Awaited<ReturnType<typeof startLocalStack>> | undefined;
  try {
    const keyless = !config.anthropic.apiKey && !config.anthropic.baseURL;
    // The ports of this home's last stack, taken again when free, so its clients find the restarted stack.
    const last = readDevPorts(config.engramHome);
    if (opts.scriptedModel) {
      const port = last.scriptedModel && (await portFree(last.scriptedModel)) ? last.scriptedModel : 0;
      model = await startModelServer({ fallback: playgroundResponder(), maxRecorded: 100, port });
    }
    stack = await startLocalStack({
      engramHome: config.engramHome,
      configured: config.backend,
      namespace: config.namespace,
      workerEnv: {
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
        ...(model ? { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'scripted-playground' } : {}),
      },
      ...(opts.port !== undefined ? { httpPort: opts.port, portFlag: '`engram dev --port <n>`' } : {}),
      ...(last.redis ? { redisPort: last.redis } : {}),
    });
    await writeDevPorts(config.engramHome, {
      ...(stack.origin === 'redis-server-child' ? { redis: Number(new URL(stack.backend.url).port) } : {}),
      ...(model ? { scriptedModel: Number(new URL(model.url).port) } : {}),
    });
    const http = stack.service.http;
    await writeDevStack(config.engramHome, {
      pid: process.pid,
      backend: { kind: stack.backend.kind, url: stack.backend.url },
      ...(http ? { dashboard: `${http.url}/dashboard` } : {}),
      ...(model ? { scriptedModel: model.url } : {}),
      startedAt: new Date().toISOString(),
    });
    const engine =
      stack.backend.kind === 'postgres'
        ? 'BullMQ on embedded PostgreSQL'
        : `BullMQ on Redis (${stack.origin})`;
    const modelLine = model
      ? `${model.url} ${PLAYGROUND_LABEL}`
      : keyless
        ? 'none: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are unset, so memory jobs will fail (set one, or use --scripted-model)'
        : (config.anthropic.baseURL ?? 'the Anthropic API (ANTHROPIC_API_KEY)');
    io.out(
      [
        READY_LINE,
        `  queue engine : ${engine} — ${redactUrl(stack.backend.url)}`,
        `  workers      : ${[...stack.service.workers.keys()].join(', ')}`,
        `  model        : ${modelLine}`,
        ...(http
          ? [
              `  dashboard    : ${http.url}/dashboard`,
              `  memories     : ${http.url}/memories`,
              `  access token : ${stack.service.dashboardTokenFile ? `${stack.service.dashboardTokenFile} (open ${http.url}/dashboard?token=…)` : 'ENGRAM_DASHBOARD_TOKEN'}`,
              `  metrics      : ${http.url}/metrics`,
              `  health       : ${http.url}/readyz`,
            ]
          : []),
        `  ENGRAM_HOME  : ${config.engramHome}`,
        ...(stack.dataDir ? [`  engine data  : ${stack.dataDir}`] : []),
        ...stack.notes.map((n) => `  note         : ${n}`),
        '',
        model
          ? 'In another terminal: npx engram run -p "Always use pnpm here, never npm." then npx engram run -p "Should I use npm or pnpm here?" (no key needed: they use the scripted model, which recalls memories that share a word with the prompt).'
          : 'In another terminal: npx engram run -p "…" (it finds this stack automatically), or `npx engram chat`.',
        'Press Ctrl-C to stop.',
      ].join('\n'),
    );
    const signal = await waitForSignal();
    io.err(`engram dev: ${signal}, stopping (workers first, then the queue engine)…`);
    // A second Ctrl-C while stopping: leave at once (children are stopped by their exit hooks).
    const force = () => {
      io.err('engram dev: stopping now without waiting for active jobs.');
      process.exit(EXIT.failure);
    };
    process.once('SIGINT', force);
    return EXIT.ok;
  } finally {
    releaseDevStack(config.engramHome);
    await stack?.stop();
    await model?.close();
  }
}
