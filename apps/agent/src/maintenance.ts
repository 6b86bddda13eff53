import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { cleanupOldTranscripts } from '@engram/agent-runtime/transcript/cleanup';

// Housekeeping the foreground does for the shared ENGRAM_HOME: transcript retention, at most once a day across
// every process (a marker file's mtime), in the background — it never delays a turn.

const MARKER = '.last-cleanup';
const ONCE_A_DAY_MS = 86_400_000;

export async function maybeCleanupTranscripts(
  engramHome: string,
  periodDays: number,
  nowMs = Date.now(),
): Promise<boolean> {
  if (!(periodDays > 0)) return false;
  const marker = join(engramHome, MARKER);
  try {
    if (nowMs - (await fs.stat(marker)).mtimeMs < ONCE_A_DAY_MS) return false;
  } catch {
    // never ran here
  }
  await fs.mkdir(engramHome, { recursive: true, mode: 0o700 });
  await fs.writeFile(marker, new Date(nowMs).toISOString(), { mode: 0o600 });
  await cleanupOldTranscripts(join(engramHome, 'projects'), { periodDays, nowMs });
  return true;
}
