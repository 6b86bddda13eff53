import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLEANUP_MARKER, maybeCleanupTranscripts, readSettingsPeriod } from './transcript-retention.js';

const DAY = 86_400_000;

/** A Claude Code-shaped transcript (first line metadata, then a user entry with its cwd), aged `days`. */
function transcript(home: string, cwd: string, id: string, days: number): string {
  const path = join(home, 'projects', cwd.replace(/[^a-zA-Z0-9]/g, '-'), `${id}.jsonl`);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(
    path,
    `${JSON.stringify({ type: 'file-history-snapshot', messageId: 'm' })}\n${JSON.stringify({
      type: 'user',
      uuid: 'u1',
      parentUuid: null,
      sessionId: id,
      cwd,
      version: '2.1.7',
      message: { role: 'user', content: 'hi' },
    })}\n`,
  );
  const at = new Date(Date.now() - days * DAY);
  utimesSync(path, at, at);
  return path;
}

describe('transcript retention from the foreground', () => {
  it('cleans at most once a day across processes with its own marker, and never when retention is 0', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-maint-'));
    const old = transcript(home, '/nowhere/r', 's1', 40);
    writeFileSync(join(home, '.last-cleanup'), 'claude code’s marker');
    const theirs = new Date(Date.now() - 1000);
    utimesSync(join(home, '.last-cleanup'), theirs, theirs);
    expect(await maybeCleanupTranscripts(home, 0)).toBe(false);
    expect(existsSync(old)).toBe(true);
    expect(await maybeCleanupTranscripts(home, 30)).toBe(true);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(join(home, CLEANUP_MARKER))).toBe(true);
    expect(existsSync(join(home, '.last-cleanup'))).toBe(true);
    expect(await maybeCleanupTranscripts(home, 30)).toBe(false);
    expect(await maybeCleanupTranscripts(home, 30, Date.now() + 2 * DAY)).toBe(true);
  });

  it('honours cleanupPeriodDays in ~/.claude/settings.json: 365 keeps a 60-day-old transcript', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-maint-user-'));
    writeFileSync(
      join(home, 'settings.json'),
      JSON.stringify({ model: 'opus', cleanupPeriodDays: 365 }, null, 2),
    );
    const sixtyDays = transcript(home, '/nowhere/a', 's60', 60);
    const ancient = transcript(home, '/nowhere/a', 's400', 400);
    expect(await maybeCleanupTranscripts(home, 30)).toBe(true);
    expect(existsSync(sixtyDays)).toBe(true);
    expect(existsSync(ancient)).toBe(false);
  });

  it('a shorter user setting never shortens the period; 0 ("delete everything" to Claude Code) neither', async () => {
    for (const days of [7, 0]) {
      const home = mkdtempSync(join(tmpdir(), 'engram-maint-short-'));
      writeFileSync(join(home, 'settings.json'), JSON.stringify({ cleanupPeriodDays: days }));
      const twenty = transcript(home, '/nowhere/b', 's20', 20);
      await maybeCleanupTranscripts(home, 30);
      expect(existsSync(twenty)).toBe(true);
    }
  });

  it('honours project and local settings of the directory each old session was launched in', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-maint-proj-'));
    const work = mkdtempSync(join(tmpdir(), 'engram-maint-work-'));
    const keepProject = join(work, 'keep-project');
    const keepLocal = join(work, 'keep-local');
    const plain = join(work, 'plain');
    for (const dir of [keepProject, keepLocal, plain]) mkdirSync(join(dir, '.claude'), { recursive: true });
    writeFileSync(
      join(keepProject, '.claude', 'settings.json'),
      JSON.stringify({ cleanupPeriodDays: 100000 }),
    );
    writeFileSync(join(keepLocal, '.claude', 'settings.json'), JSON.stringify({ cleanupPeriodDays: 10 }));
    writeFileSync(
      join(keepLocal, '.claude', 'settings.local.json'),
      JSON.stringify({ cleanupPeriodDays: 90 }),
    );
    const a = transcript(home, keepProject, 'a', 60);
    const b = transcript(home, keepLocal, 'b', 60);
    const c = transcript(home, plain, 'c', 60);
    await maybeCleanupTranscripts(home, 30);
    expect(existsSync(a)).toBe(true);
    expect(existsSync(b)).toBe(true);
    expect(existsSync(c)).toBe(false);
  });

  it('deletes nothing a broken settings file governs', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-maint-bad-'));
    writeFileSync(join(home, 'settings.json'), '{ "cleanupPeriodDays": 365, }');
    const old = transcript(home, '/nowhere/c', 'old', 400);
    await maybeCleanupTranscripts(home, 30);
    expect(existsSync(old)).toBe(true);

    const work = mkdtempSync(join(tmpdir(), 'engram-maint-badproj-'));
    mkdirSync(join(work, '.claude'));
    writeFileSync(join(work, '.claude', 'settings.local.json'), JSON.stringify({ cleanupPeriodDays: '365' }));
    const home2 = mkdtempSync(join(tmpdir(), 'engram-maint-bad2-'));
    const governed = transcript(home2, work, 'g', 400);
    await maybeCleanupTranscripts(home2, 30);
    expect(existsSync(governed)).toBe(true);
  });

  it('reads cleanupPeriodDays as Claude Code defines it: a non-negative integer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-maint-read-'));
    const write = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    expect(await readSettingsPeriod(join(dir, 'missing.json'))).toEqual({ kind: 'absent' });
    expect(await readSettingsPeriod(write('a.json', '{"theme":"dark"}'))).toEqual({ kind: 'absent' });
    expect(await readSettingsPeriod(write('b.json', '{"cleanupPeriodDays":365}'))).toEqual({
      kind: 'days',
      days: 365,
    });
    expect((await readSettingsPeriod(write('c.json', '{"cleanupPeriodDays":-1}'))).kind).toBe('invalid');
    expect((await readSettingsPeriod(write('d.json', '{"cleanupPeriodDays":1.5}'))).kind).toBe('invalid');
    expect((await readSettingsPeriod(write('e.json', '[]'))).kind).toBe('invalid');
  });
});
