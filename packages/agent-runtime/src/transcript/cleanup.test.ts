import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanupOldTranscripts } from './cleanup.js';

function file(path: string, ageDays: number, now: number) {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, 'x');
  const at = new Date(now - ageDays * 86_400_000);
  utimesSync(path, at, at);
}

describe('transcript retention', () => {
  it('removes transcripts and tool results past the period, keeps memory, notes and fresh sessions', async () => {
    const now = Date.parse('2026-11-30T00:00:00Z');
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-'));
    const p = join(projects, '-repo');
    file(join(p, 'old.jsonl'), 31, now);
    file(join(p, 'old', 'tool-results', 't1.txt'), 31, now);
    file(join(p, 'old', 'cache-safe-params.json'), 31, now);
    file(join(p, 'fresh.jsonl'), 2, now);
    file(join(p, 'fresh', 'tool-results', 't2.txt'), 2, now);
    file(join(p, 'noted', 'session-memory', 'summary.md'), 90, now);
    file(join(p, 'noted.jsonl'), 90, now);
    file(join(p, 'memory', 'ancient.md'), 400, now);
    file(join(projects, '-gone', 'gone.jsonl'), 45, now);

    const report = await cleanupOldTranscripts(projects, { periodDays: 30, nowMs: now });
    expect(existsSync(join(p, 'old.jsonl'))).toBe(false);
    expect(existsSync(join(p, 'old'))).toBe(false);
    expect(existsSync(join(p, 'fresh.jsonl'))).toBe(true);
    expect(existsSync(join(p, 'fresh', 'tool-results', 't2.txt'))).toBe(true);
    expect(existsSync(join(p, 'noted', 'session-memory', 'summary.md'))).toBe(true);
    expect(existsSync(join(p, 'noted.jsonl'))).toBe(false);
    expect(existsSync(join(p, 'memory', 'ancient.md'))).toBe(true);
    expect(existsSync(join(projects, '-gone'))).toBe(false);
    expect(report.removedFiles).toHaveLength(5);
  });

  it('does nothing when retention is off (0 days)', async () => {
    const now = Date.now();
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-off-'));
    file(join(projects, '-r', 'old.jsonl'), 400, now);
    expect(await cleanupOldTranscripts(projects, { periodDays: 0, nowMs: now })).toEqual({
      removedFiles: [],
      removedDirs: [],
    });
    expect(existsSync(join(projects, '-r', 'old.jsonl'))).toBe(true);
  });
});
