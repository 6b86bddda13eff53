import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { describeSandbox, sandboxStatus } from '@engram/agent-runtime/sandbox/sandbox';
import { MemoryQueue, QueueNotConfiguredError } from '@engram/memory-client/memory-queue';
import { JOB_KINDS } from '@engram/queue/catalog';
import { inspectBackend } from '@engram/queue/diagnostics';
import { describeTelemetry, telemetrySettings } from '@engram/telemetry/settings';
import {
  DEFAULT_OUTBOX_MAX_AGE_MS,
  operationsChecks,
  operationsReport,
  readWorkersModel,
  scanOutboxes,
} from '@engram/worker-service/operations';
import type { AgentConfig } from '../config.js';
import { readDevStack } from '../dev-stack.js';
import { EXIT, type Output } from './output.js';

// `engram doctor`: one line per check, ok or FAIL with the fix. Exit 1 when any check fails — also when an
// outbox holds memory work older than the threshold (`--outbox-max-age`) or the reconcile sweep failed, never
// ran or stopped running.

export interface CheckLine {
  ok: boolean;
  name: string;
  detail: string;
  fix?: string;
}

/** The day support ends for each Node major Engram admits (Node.js release schedule). */
const NODE_END_OF_LIFE: Record<number, string> = { 20: '2026-04-30', 22: '2027-04-30', 24: '2028-04-30' };
/** The Node major the image and CI run (Dockerfile, .ci/run). */
export const RUNTIME_NODE_MAJOR = 24;

/**
 * The Node running this: ok on any version `engines` admits, with a note on one past its end of life or older
 * than the one the image and CI run (on Node 20 telemetry also costs about twice as much per served turn).
 */
export function checkNode(version: string, today: string = new Date().toISOString().slice(0, 10)): CheckLine {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  const endOfLife = NODE_END_OF_LIFE[major];
  if (major >= RUNTIME_NODE_MAJOR) return { ok: true, name: 'node', detail: version };
  const past = endOfLife !== undefined && endOfLife < today;
  return {
    ok: true,
    name: 'node',
    detail: `${version} (${past ? `end-of-life since ${endOfLife}; ` : ''}the image and CI run Node ${RUNTIME_NODE_MAJOR}${
      major < 22 ? ', where telemetry costs about half as much per served turn' : ''
    })`,
  };
}

async function checkModel(config: AgentConfig): Promise<CheckLine> {
  const name = 'model';
  if (!config.anthropic.apiKey && !config.anthropic.baseURL) {
    return {
      ok: false,
      name,
      detail: 'no ANTHROPIC_API_KEY',
      fix: 'export ANTHROPIC_API_KEY=… (or try `engram demo`)',
    };
  }
  const base = (config.anthropic.baseURL ?? 'https://api.anthropic.com').replace(/\/+$/, '');
  try {
    const res = await fetch(`${base}/v1/models?limit=1`, {
      headers: { 'x-api-key': config.anthropic.apiKey ?? '', 'anthropic-version': '2023-06-01' },
      signal: AbortSignal.timeout(5_000),
    });
    if (res.status === 401 || res.status === 403) {
      return {
        ok: false,
        name,
        detail: `the API rejected the key (HTTP ${res.status})`,
        fix: 'check ANTHROPIC_API_KEY',
      };
    }
    if (!res.ok)
      return { ok: false, name, detail: `HTTP ${res.status} from ${base}`, fix: 'check ANTHROPIC_BASE_URL' };
    return { ok: true, name, detail: `${config.model} (recall: ${config.smallModel}) via ${base}` };
  } catch (error) {
    return {
      ok: false,
      name,
      detail: `cannot reach ${base}: ${(error as Error).message}`,
      fix: 'check the network or ANTHROPIC_BASE_URL',
    };
  }
}

async function checkHome(config: AgentConfig): Promise<CheckLine> {
  const probe = join(config.engramHome, `.doctor-${randomBytes(4).toString('hex')}`);
  try {
    await fs.mkdir(config.engramHome, { recursive: true, mode: 0o700 });
    await fs.writeFile(probe, 'ok', { mode: 0o600 });
    await fs.rm(probe);
    return { ok: true, name: 'ENGRAM_HOME', detail: `${config.engramHome} is writable` };
  } catch (error) {
    return {
      ok: false,
      name: 'ENGRAM_HOME',
      detail: `${config.engramHome}: ${(error as Error).message}`,
      fix: 'set ENGRAM_HOME to a writable directory',
    };
  }
}

/**
 * Which OS-sandbox mode memory forks run in on this host. Unavailable is a safe mode (forks get no Bash,
 * writes stay jailed), so it fails only where the sandbox is required (ENGRAM_SANDBOX=require).
 */
export async function checkSandbox(env: NodeJS.ProcessEnv = process.env): Promise<CheckLine> {
  const status = await sandboxStatus({ env });
  const line: CheckLine = {
    ok: status.available || status.mode !== 'require',
    name: 'sandbox',
    detail: describeSandbox(status),
  };
  if (!status.available && status.mode !== 'off') {
    line.fix =
      'for sandboxed Bash in memory forks: install bubblewrap (Debian: apt-get install bubblewrap) on Linux ' +
      'with user namespaces allowed';
  }
  return line;
}

export interface DoctorOptions {
  /** An outbox item older than this fails the check (default DEFAULT_OUTBOX_MAX_AGE_MS). */
  outboxMaxAgeMs?: number;
}

export async function runDoctorChecks(config: AgentConfig, opts: DoctorOptions = {}): Promise<CheckLine[]> {
  const outboxMaxAgeMs = opts.outboxMaxAgeMs ?? DEFAULT_OUTBOX_MAX_AGE_MS;
  const lines: CheckLine[] = [];
  const dev = readDevStack(config.engramHome);
  const source = dev?.backend?.url === config.backend.url ? '`engram dev`' : 'configured';
  // The default URL nobody chose is not probed: what answers there may be another home's stack.
  const report = config.backend.implicit
    ? undefined
    : await inspectBackend(config.backend, 3_000, config.namespace);
  if (!report) {
    const message = new QueueNotConfiguredError(config.engramHome).message;
    lines.push({
      ok: false,
      name: 'queue engine',
      detail: `none: no \`engram dev\` is running for ENGRAM_HOME ${config.engramHome}, and neither REDIS_URL nor ENGRAM_QUEUE_URL is set`,
      fix: message.slice(message.indexOf('Start the stack')),
    });
  } else {
    const engineName =
      config.backend.kind === 'redis'
        ? `Redis ${report.version ?? ''}`.trim()
        : `PostgreSQL ${report.version ?? ''}`.trim();
    lines.push({
      ok: report.reachable && report.problems.length === 0,
      name: 'queue engine',
      detail: report.reachable
        ? `${engineName} at ${report.url} (${source})${report.evictionPolicy ? `, maxmemory-policy ${report.evictionPolicy}` : ''}${
            report.appendOnly !== undefined ? `, AOF ${report.appendOnly ? 'on' : 'off'}` : ''
          }`
        : `${report.url} (${source})`,
      ...(report.problems.length ? { fix: report.problems.join(' ') } : {}),
    });
  }
  for (const note of report?.notes ?? []) lines.push({ ok: true, name: 'note', detail: note });
  lines.push(await checkHome(config));
  lines.push(await checkModel(config));
  lines.push(await checkSandbox());
  lines.push(checkNode(process.version));
  // Whether this environment exports telemetry, and where: what `engram serve`/`workers` would do with it.
  lines.push({
    ok: true,
    name: 'telemetry',
    detail: describeTelemetry(telemetrySettings(process.env, 'serve')),
  });
  if (report?.reachable) {
    const memory = new MemoryQueue(config);
    try {
      for (const kind of JOB_KINDS) {
        const count = await memory.producer
          .queue(kind)
          .getWorkersCount()
          .catch(() => -1);
        lines.push(
          count > 0
            ? {
                ok: true,
                name: `workers: ${kind}`,
                detail: `${count} worker${count === 1 ? '' : 's'} fetching`,
              }
            : {
                ok: false,
                name: `workers: ${kind}`,
                detail: count < 0 ? 'could not list workers' : 'no worker is consuming this queue',
                fix: 'start them: `engram workers` (or `engram dev`, or `docker compose up workers`)',
              },
        );
      }
      // The workers' own model (their environment, recorded at their start): without one every memory job
      // fails, however many workers fetch.
      const workersModel = await readWorkersModel(memory.engine.state).catch(() => undefined);
      if (workersModel && !workersModel.configured) {
        lines.push({
          ok: false,
          name: 'workers: model',
          detail: `no model configured: the workers started ${new Date(workersModel.startedAtMs).toISOString()} have no ANTHROPIC_API_KEY and no ANTHROPIC_BASE_URL, so extraction, session notes and consolidation fail`,
          fix: 'set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL) where the workers run and restart them (or `engram dev --scripted-model`)',
        });
      }
      // Outboxes and the reconcile sweep's last run (recorded in the engine's state by the workers).
      lines.push(
        ...operationsChecks(
          await operationsReport({
            engramHome: config.engramHome,
            state: memory.engine.state,
            outboxMaxAgeMs,
          }),
        ),
      );
    } finally {
      await memory.close();
    }
  } else {
    // Without the engine the outboxes can still be read (they are files); the sweep's state cannot.
    const backlog = await scanOutboxes(config.engramHome);
    const checks = operationsChecks({ atMs: Date.now(), outboxMaxAgeMs, backlog });
    lines.push(...checks.filter((c) => c.name !== 'reconcile'), {
      ok: false,
      name: 'reconcile',
      detail: 'unknown: the queue engine is unreachable',
      fix: 'fix the queue engine first (see above)',
    });
  }
  return lines;
}

export async function doctorCommand(
  config: AgentConfig,
  opts: { json: boolean } & DoctorOptions,
  io: Output,
): Promise<number> {
  const lines = await runDoctorChecks(config, opts);
  if (opts.json) io.out(JSON.stringify({ ok: lines.every((l) => l.ok), checks: lines }));
  else {
    for (const l of lines)
      io.out(`${l.ok ? 'ok  ' : 'FAIL'}  ${l.name}: ${l.detail}${l.fix ? `\n      fix: ${l.fix}` : ''}`);
  }
  return lines.every((l) => l.ok) ? EXIT.ok : EXIT.failure;
}
