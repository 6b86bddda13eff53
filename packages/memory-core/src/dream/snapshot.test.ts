import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listMemories } from '../memdir/memory-files.js';
import { scanMemoryDir } from '../memdir/scan.js';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { readDreamManifest } from './manifest.js';
import {
  createSnapshot,
  HISTORY_DIRNAME,
  listSnapshots,
  pruneSnapshots,
  restoreSnapshot,
  SnapshotError,
  snapshotDir,
} from './snapshot.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const OLD = new Date('2026-10-01T00:00:00Z');

function memoryDir(): string {
  const t = makeTempDir('engram-snap-');
  cleanups.push(t.cleanup);
  const dir = join(t.dir, 'memory');
  mkdirSync(join(dir, 'team'), { recursive: true });
  const write = (rel: string, text: string) => {
    writeFileSync(join(dir, rel), text);
    utimesSync(join(dir, rel), OLD, OLD);
  };
  write('MEMORY.md', '- [A](a.md) — alpha\n- [B](b.md) — beta\n');
  write('a.md', '---\nname: A\ndescription: alpha\ntype: user\n---\nalpha body\n');
  write('b.md', '---\nname: B\ndescription: beta\ntype: project\n---\nbeta body\n');
  write('team/MEMORY.md', '- [T](t.md) — team\n');
  write('team/t.md', '---\nname: T\ndescription: team\ntype: reference\n---\nteam body\n');
  writeFileSync(join(dir, '.consolidate-lock'), '123');
  writeFileSync(join(dir, 'notes.txt'), 'not markdown');
  return dir;
}

describe('snapshots', () => {
  it('copies every Markdown file with its mtime under .history, atomically, never copying .history itself', async () => {
    const dir = memoryDir();
    const first = await createSnapshot(dir, { label: 'first', now: new Date('2026-11-30T12:00:00.123Z') });
    expect(first.id).toMatch(/^20261130T120000123Z-[0-9a-f]{8}$/);
    expect(first.files.map((f) => f.path)).toEqual([
      'MEMORY.md',
      'a.md',
      'b.md',
      'team/MEMORY.md',
      'team/t.md',
    ]);
    const copy = join(dir, HISTORY_DIRNAME, first.id);
    expect(readFileSync(join(copy, 'team/t.md'), 'utf8')).toContain('team body');
    expect(statSync(join(copy, 'a.md')).mtimeMs).toBe(OLD.getTime());
    expect(existsSync(join(copy, 'notes.txt'))).toBe(false);
    expect(existsSync(join(copy, '.consolidate-lock'))).toBe(false);
    // A snapshot reads like a memory directory (the safety check's baseline after an interrupted run).
    expect(snapshotDir(dir, first.id)).toBe(copy);
    expect((await readDreamManifest(copy)).map((e) => e.file)).toEqual(['a.md', 'b.md', 'team/t.md']);
    // No temp directory is left behind.
    expect(readdirSync(join(dir, HISTORY_DIRNAME)).filter((n) => n.startsWith('.tmp-'))).toEqual([]);

    const second = await createSnapshot(dir, { now: new Date('2026-11-30T13:00:00Z') });
    expect(second.files.some((f) => f.path.startsWith('.history'))).toBe(false);
    expect((await listSnapshots(dir)).map((s) => s.id)).toEqual([second.id, first.id]);
    expect((await listSnapshots(dir))[1]?.label).toBe('first');
  });

  it('never shows snapshots as memories', async () => {
    const dir = memoryDir();
    await createSnapshot(dir);
    const scan = await scanMemoryDir(dir, { cache: false });
    expect(scan.headers.map((h) => h.filename).sort()).toEqual(['a.md', 'b.md', 'team/t.md']);
    expect((await listMemories(dir)).memories).toHaveLength(3);
  });

  it('restores changed and deleted files with their mtimes, removes newer files and keeps .history', async () => {
    const dir = memoryDir();
    const snap = await createSnapshot(dir);
    writeFileSync(join(dir, 'a.md'), '');
    writeFileSync(join(dir, 'MEMORY.md'), '');
    writeFileSync(join(dir, 'team/t.md'), 'changed');
    await import('node:fs/promises').then((fs) => fs.rm(join(dir, 'b.md')));
    writeFileSync(join(dir, 'new.md'), '---\nname: N\n---\nnew\n');
    mkdirSync(join(dir, 'logs'));
    writeFileSync(join(dir, 'logs', 'day.md'), 'log');

    const result = await restoreSnapshot(dir, snap.id);
    expect(result.restored.sort()).toEqual(['MEMORY.md', 'a.md', 'b.md', 'team/t.md']);
    expect(result.removed.sort()).toEqual(['logs/day.md', 'new.md']);
    expect(readFileSync(join(dir, 'a.md'), 'utf8')).toContain('alpha body');
    expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe('- [A](a.md) — alpha\n- [B](b.md) — beta\n');
    expect(statSync(join(dir, 'b.md')).mtimeMs).toBe(OLD.getTime());
    expect(existsSync(join(dir, 'new.md'))).toBe(false);
    // Non-Markdown and hidden files are not memory files: left alone.
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('not markdown');
    expect(readFileSync(join(dir, '.consolidate-lock'), 'utf8')).toBe('123');

    // The restore itself was snapshotted first, so it can be undone.
    expect(result.backupId).toBeDefined();
    const snaps = await listSnapshots(dir);
    expect(snaps.map((s) => s.id)).toContain(snap.id);
    const backup = snaps.find((s) => s.id === result.backupId)!;
    expect(backup.label).toBe(`before restoring ${snap.id}`);
    expect(backup.files.map((f) => f.path)).toContain('new.md');
    const undo = await restoreSnapshot(dir, backup.id, { backupCurrent: false });
    expect(undo.backupId).toBeUndefined();
    expect(readFileSync(join(dir, 'new.md'), 'utf8')).toContain('new');
    expect(existsSync(join(dir, 'b.md'))).toBe(false);
  });

  it('refuses unknown and malformed ids', async () => {
    const dir = memoryDir();
    await expect(restoreSnapshot(dir, '../../etc')).rejects.toMatchObject({ code: 'INVALID_ID' });
    await expect(restoreSnapshot(dir, '20261130T120000123Z-abcd1234')).rejects.toBeInstanceOf(SnapshotError);
    await expect(restoreSnapshot(dir, '20261130T120000123Z-abcd1234')).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('keeps the newest snapshots and removes stale temp directories', async () => {
    const dir = memoryDir();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await createSnapshot(dir, { now: new Date(Date.UTC(2026, 10, 1 + i)) })).id);
    }
    mkdirSync(join(dir, HISTORY_DIRNAME, '.tmp-crashed'));
    const old = new Date(Date.now() - 2 * 3_600_000);
    utimesSync(join(dir, HISTORY_DIRNAME, '.tmp-crashed'), old, old);
    const { removed } = await pruneSnapshots(dir, { keep: 2 });
    expect(removed.sort()).toEqual(ids.slice(0, 3).sort());
    expect((await listSnapshots(dir)).map((s) => s.id)).toEqual([ids[4], ids[3]]);
    expect(existsSync(join(dir, HISTORY_DIRNAME, '.tmp-crashed'))).toBe(false);
  });
});
