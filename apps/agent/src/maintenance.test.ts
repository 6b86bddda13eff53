import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { maybeCleanupTranscripts } from './maintenance.js';

describe('transcript retention from the foreground', () => {
  it('cleans at most once a day across processes, and never when retention is 0', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-maint-'));
    const old = join(home, 'projects', '-r', 's1.jsonl');
    mkdirSync(join(old, '..'), { recursive: true });
    writeFileSync(old, '{}\n');
    const past = new Date(Date.now() - 40 * 86_400_000);
    utimesSync(old, past, past);
    expect(await maybeCleanupTranscripts(home, 0)).toBe(false);
    expect(existsSync(old)).toBe(true);
    expect(await maybeCleanupTranscripts(home, 30)).toBe(true);
    expect(existsSync(old)).toBe(false);
    expect(await maybeCleanupTranscripts(home, 30)).toBe(false);
    expect(await maybeCleanupTranscripts(home, 30, Date.now() + 2 * 86_400_000)).toBe(true);
  });
});
