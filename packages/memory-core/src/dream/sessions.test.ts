import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { isSessionTranscriptName, listSessionsTouchedSince } from './sessions.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function dir(): string {
  const t = makeTempDir('engram-sessions-');
  cleanups.push(t.cleanup);
  return t.dir;
}

function touch(path: string, mtimeMs: number) {
  writeFileSync(path, '{}\n');
  const t = new Date(mtimeMs);
  utimesSync(path, t, t);
}

const SINCE = Date.parse('2026-11-29T00:00:00Z');

describe('listSessionsTouchedSince', () => {
  it('lists session transcripts changed strictly after the time, newest first, minus the current session', async () => {
    const d = dir();
    touch(join(d, '3f1e2d4c-aaaa-4bbb-8ccc-123456789abc.jsonl'), SINCE + 3_000);
    touch(join(d, 'sAbc_12.jsonl'), SINCE + 5_000);
    touch(join(d, 'current.jsonl'), SINCE + 9_000);
    touch(join(d, 'old.jsonl'), SINCE - 1_000);
    touch(join(d, 'exactly.jsonl'), SINCE);
    expect(await listSessionsTouchedSince(d, SINCE, { excludeSessionId: 'current' })).toEqual([
      'sAbc_12',
      '3f1e2d4c-aaaa-4bbb-8ccc-123456789abc',
    ]);
  });

  it('ignores sidechains, other files, hidden files and directories', async () => {
    const d = dir();
    touch(join(d, 'agent-1234.jsonl'), SINCE + 1);
    touch(join(d, 'notes.txt'), SINCE + 1);
    touch(join(d, '.hidden.jsonl'), SINCE + 1);
    touch(join(d, '-dash.jsonl'), SINCE + 1);
    mkdirSync(join(d, 'dir.jsonl'));
    mkdirSync(join(d, 'real'));
    touch(join(d, 'real', 'nested.jsonl'), SINCE + 1);
    touch(join(d, 'real.jsonl'), SINCE + 1);
    expect(await listSessionsTouchedSince(d, SINCE)).toEqual(['real']);
    expect(isSessionTranscriptName('agent-x.jsonl')).toBe(false);
    expect(isSessionTranscriptName('a.b.jsonl')).toBe(false);
  });

  it('is bounded by the limit, and a missing directory has no sessions', async () => {
    const d = dir();
    for (let i = 0; i < 8; i++) touch(join(d, `s${i}.jsonl`), SINCE + 1_000 * (i + 1));
    expect(await listSessionsTouchedSince(d, SINCE, { limit: 3 })).toEqual(['s7', 's6', 's5']);
    expect(await listSessionsTouchedSince(join(d, 'nope'), SINCE)).toEqual([]);
  });
});
