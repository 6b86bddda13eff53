import {
  existsSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanupOldTranscripts, transcriptCwd } from './cleanup.js';

const DAY = 86_400_000;

function file(path: string, ageDays: number, now: number, content = 'x') {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, content);
  const at = new Date(now - ageDays * DAY);
  utimesSync(path, at, at);
}

describe('transcript retention', () => {
  it("removes an old session's whole footprint — transcript, subagents, tool results, notes — and nothing else", async () => {
    const now = Date.parse('2026-11-30T00:00:00Z');
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-'));
    const p = join(projects, '-repo');
    file(join(p, 'old.jsonl'), 31, now);
    file(join(p, 'old', 'tool-results', 't1.txt'), 31, now);
    file(join(p, 'old', 'subagents', 'agent-a1.jsonl'), 40, now);
    file(join(p, 'old', 'subagents', 'nested', 'agent-a2.jsonl'), 40, now);
    file(join(p, 'old', 'session-memory', 'summary.md'), 35, now);
    file(join(p, 'old', 'cache-safe-params.json'), 31, now);
    file(join(p, 'fresh.jsonl'), 2, now);
    file(join(p, 'fresh', 'tool-results', 't2.txt'), 2, now);
    file(join(p, 'memory', 'ancient.md'), 400, now);
    file(join(p, 'memory.jsonl'), 400, now);
    file(join(p, 'notes.cast'), 400, now);
    file(join(projects, '-gone', 'gone.jsonl'), 45, now);

    const report = await cleanupOldTranscripts(projects, { periodDays: 30, nowMs: now });
    expect(existsSync(join(p, 'old.jsonl'))).toBe(false);
    expect(existsSync(join(p, 'old'))).toBe(false);
    expect(existsSync(join(p, 'fresh.jsonl'))).toBe(true);
    expect(existsSync(join(p, 'fresh', 'tool-results', 't2.txt'))).toBe(true);
    expect(existsSync(join(p, 'memory', 'ancient.md'))).toBe(true);
    // Not attributable to a session: left alone.
    expect(existsSync(join(p, 'memory.jsonl'))).toBe(true);
    expect(existsSync(join(p, 'notes.cast'))).toBe(true);
    expect(existsSync(join(projects, '-gone'))).toBe(false);
    expect(report.removedFiles.sort()).toEqual(
      [join(p, 'old.jsonl'), join(projects, '-gone', 'gone.jsonl')].sort(),
    );
  });

  it('keeps a whole session when any file of it is newer than the period (none of it goes)', async () => {
    const now = Date.parse('2026-11-30T00:00:00Z');
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-part-'));
    const p = join(projects, '-repo');
    file(join(p, 's1.jsonl'), 60, now);
    file(join(p, 's1', 'tool-results', 'old.txt'), 60, now);
    file(join(p, 's1', 'subagents', 'agent-x.jsonl'), 3, now);
    await cleanupOldTranscripts(projects, { periodDays: 30, nowMs: now });
    expect(existsSync(join(p, 's1.jsonl'))).toBe(true);
    expect(existsSync(join(p, 's1', 'tool-results', 'old.txt'))).toBe(true);
    expect(existsSync(join(p, 's1', 'subagents', 'agent-x.jsonl'))).toBe(true);
  });

  it('never touches a session directory without a transcript beside it, nor a symlink target', async () => {
    const now = Date.parse('2026-11-30T00:00:00Z');
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-orphan-'));
    const outside = mkdtempSync(join(tmpdir(), 'engram-cleanup-outside-'));
    file(join(outside, 'precious.txt'), 400, now);
    const p = join(projects, '-repo');
    file(join(p, 'lonely', 'tool-results', 't.txt'), 400, now);
    file(join(p, 's2.jsonl'), 90, now);
    mkdirSync(join(p, 's2'), { recursive: true });
    symlinkSync(outside, join(p, 's2', 'link'));
    lutimesSync(join(p, 's2', 'link'), new Date(now - 90 * DAY), new Date(now - 90 * DAY));
    await cleanupOldTranscripts(projects, { periodDays: 30, nowMs: now });
    expect(existsSync(join(p, 'lonely', 'tool-results', 't.txt'))).toBe(true);
    expect(existsSync(join(p, 's2.jsonl'))).toBe(false);
    expect(existsSync(join(outside, 'precious.txt'))).toBe(true);
  });

  it('applies the longer per-session period from the launch directory the transcript records', async () => {
    const now = Date.parse('2026-11-30T00:00:00Z');
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-per-'));
    const line = (cwd: string) =>
      `${JSON.stringify({ type: 'summary', summary: 'x', leafUuid: 'u' })}\n${JSON.stringify({ type: 'user', uuid: 'u', cwd })}\n`;
    file(join(projects, '-keep', 'a.jsonl'), 60, now, line('/work/keep'));
    file(join(projects, '-go', 'b.jsonl'), 60, now, line('/work/go'));
    file(join(projects, '-unknown', 'c.jsonl'), 60, now, '{"type":"summary"}\n');
    const asked: Array<string | undefined> = [];
    const report = await cleanupOldTranscripts(projects, {
      periodDays: 30,
      nowMs: now,
      periodForSession: async (cwd) => {
        asked.push(cwd);
        if (cwd === '/work/keep') return 365;
        if (cwd === '/work/go') return 7; // shorter than the base: the base (30) still applies
        return undefined;
      },
    });
    expect(asked.sort()).toEqual(['/work/go', '/work/keep', undefined]);
    expect(existsSync(join(projects, '-keep', 'a.jsonl'))).toBe(true);
    expect(existsSync(join(projects, '-go', 'b.jsonl'))).toBe(false);
    expect(existsSync(join(projects, '-unknown', 'c.jsonl'))).toBe(true);
    expect(report.keptSessions).toBe(2);
    expect(await transcriptCwd(join(projects, '-keep', 'a.jsonl'))).toBe('/work/keep');
  });

  it('does nothing when retention is off (0 days or Infinity)', async () => {
    const now = Date.now();
    const projects = mkdtempSync(join(tmpdir(), 'engram-cleanup-off-'));
    file(join(projects, '-r', 'old.jsonl'), 400, now);
    for (const periodDays of [0, Number.POSITIVE_INFINITY]) {
      expect(await cleanupOldTranscripts(projects, { periodDays, nowMs: now })).toEqual({
        removedFiles: [],
        removedDirs: [],
        keptSessions: 0,
      });
    }
    expect(existsSync(join(projects, '-r', 'old.jsonl'))).toBe(true);
  });
});
