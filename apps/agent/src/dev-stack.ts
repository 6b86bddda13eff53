import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { z } from 'zod';

// `engram dev` records where its stack runs in ENGRAM_HOME/dev-stack.json, so `engram run` in another
// terminal finds the same queue without exporting anything. The file has one owner: the `engram dev` that
// created it exclusively (claimDevStack); a second stack on the same home is refused, a file left by a dead
// process is taken over, and only the owner removes it. Readers ignore it once its process is gone.

const devStackSchema = z.object({
  pid: z.number().int().positive(),
  /** `starting` while the owner brings the engine up; readers use only a `running` stack. */
  state: z.enum(['starting', 'running']).default('running'),
  backend: z.object({ kind: z.enum(['redis', 'postgres']), url: z.string() }).optional(),
  dashboard: z.string().optional(),
  /** The scripted model of a keyless stack (`engram dev --scripted-model`), for agents to use. */
  scriptedModel: z.string().optional(),
  startedAt: z.string(),
});
export type DevStack = z.infer<typeof devStackSchema>;

export class DevStackBusyError extends EngramError {
  constructor(
    readonly engramHome: string,
    readonly owner: DevStack,
  ) {
    super(
      'DEV_STACK_RUNNING',
      `another \`engram dev\` (pid ${owner.pid}${owner.dashboard ? `, dashboard ${owner.dashboard}` : ''}) already runs ` +
        `the stack for ENGRAM_HOME ${engramHome}. Use that one (\`engram run\` and \`engram chat\` find it), stop it ` +
        'first, or start this one with another ENGRAM_HOME.',
      { retryable: false },
    );
  }
}

export function devStackPath(engramHome: string): string {
  return join(engramHome, 'dev-stack.json');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readRecord(engramHome: string): DevStack | undefined {
  try {
    const parsed = devStackSchema.safeParse(JSON.parse(readFileSync(devStackPath(engramHome), 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The running stack of this home, if its process is alive. */
export function readDevStack(engramHome: string): DevStack | undefined {
  const record = readRecord(engramHome);
  return record && record.state === 'running' && record.backend && alive(record.pid) ? record : undefined;
}

/**
 * Become the owner of ENGRAM_HOME/dev-stack.json, or throw DevStackBusyError naming the live owner. The file is
 * created with O_EXCL, so of two stacks starting at once exactly one wins.
 */
export function claimDevStack(engramHome: string, pid = process.pid): void {
  const path = devStackPath(engramHome);
  mkdirSync(engramHome, { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      try {
        writeSync(fd, `${JSON.stringify({ pid, state: 'starting', startedAt: new Date().toISOString() })}\n`);
      } finally {
        closeSync(fd);
      }
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = readRecord(engramHome);
    if (owner && owner.pid !== pid && alive(owner.pid)) throw new DevStackBusyError(engramHome, owner);
    // Left by a process that is gone (or unreadable): take it over.
    rmSync(path, { force: true });
  }
  throw new Error(`could not claim ${path}; remove it if no \`engram dev\` is running.`);
}

/** Publish the running stack (owner only). */
export async function writeDevStack(engramHome: string, stack: Omit<DevStack, 'state'>): Promise<void> {
  await writeFileAtomic(
    devStackPath(engramHome),
    `${JSON.stringify({ ...stack, state: 'running' }, null, 2)}\n`,
  );
}

/** Remove the record, but only if this process owns it. */
export function releaseDevStack(engramHome: string, pid = process.pid): void {
  const record = readRecord(engramHome);
  if (record && record.pid !== pid) return;
  rmSync(devStackPath(engramHome), { force: true });
}

/** The backend a running `engram dev` uses, when none was configured explicitly. */
export function devStackBackend(engramHome: string): QueueBackendConfig | undefined {
  const stack = readDevStack(engramHome);
  if (!stack?.backend) return undefined;
  return stack.backend.kind === 'postgres'
    ? { kind: 'postgres', url: stack.backend.url, implicit: false }
    : { kind: 'redis', url: stack.backend.url, implicit: false };
}

// The ports a home's stack last ran on, kept beside dev-stack.json but never removed: a restarted `engram dev`
// takes them again when they are free, so a client that read dev-stack.json once (a running `engram serve`, a
// `chat`) finds the new stack where the old one was.
const devPortsSchema = z.object({
  redis: z.number().int().min(1).max(65_535).optional(),
  scriptedModel: z.number().int().min(1).max(65_535).optional(),
});
export type DevPorts = z.infer<typeof devPortsSchema>;

export function devPortsPath(engramHome: string): string {
  return join(engramHome, 'dev-ports.json');
}

/** The ports recorded by the last `engram dev` on this home ({} when none or unreadable). */
export function readDevPorts(engramHome: string): DevPorts {
  try {
    const parsed = devPortsSchema.safeParse(JSON.parse(readFileSync(devPortsPath(engramHome), 'utf8')));
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/** Record the ports this stack took (owner only), keeping the other recorded ones. */
export async function writeDevPorts(engramHome: string, ports: DevPorts): Promise<void> {
  const merged = { ...readDevPorts(engramHome), ...ports };
  await writeFileAtomic(devPortsPath(engramHome), `${JSON.stringify(merged, null, 2)}\n`);
}
