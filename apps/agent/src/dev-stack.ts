import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { z } from 'zod';

// `engram dev` records where its stack runs in ENGRAM_HOME/dev-stack.json, so `engram run` in another
// terminal finds the same queue without exporting anything. Ignored once the dev process is gone.

const devStackSchema = z.object({
  pid: z.number().int().positive(),
  backend: z.object({ kind: z.enum(['redis', 'postgres']), url: z.string() }),
  dashboard: z.string().optional(),
  startedAt: z.string(),
});
export type DevStack = z.infer<typeof devStackSchema>;

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

export function readDevStack(engramHome: string): DevStack | undefined {
  try {
    const parsed = devStackSchema.safeParse(JSON.parse(readFileSync(devStackPath(engramHome), 'utf8')));
    return parsed.success && alive(parsed.data.pid) ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export async function writeDevStack(engramHome: string, stack: DevStack): Promise<void> {
  await writeFileAtomic(devStackPath(engramHome), `${JSON.stringify(stack, null, 2)}\n`);
}

export function removeDevStack(engramHome: string): void {
  rmSync(devStackPath(engramHome), { force: true });
}

/** The backend a running `engram dev` uses, when none was configured explicitly. */
export function devStackBackend(engramHome: string): QueueBackendConfig | undefined {
  const stack = readDevStack(engramHome);
  if (!stack) return undefined;
  return stack.backend.kind === 'postgres'
    ? { kind: 'postgres', url: stack.backend.url, implicit: false }
    : { kind: 'redis', url: stack.backend.url, implicit: false };
}
