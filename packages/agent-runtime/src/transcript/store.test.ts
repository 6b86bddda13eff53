import { appendFile, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import { createSystemEntry, createUserEntry, type EntryStamp } from './entry.js';
import { parseTranscript, TranscriptError, TranscriptStore } from './store.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await makeTempDir());
});
afterEach(() => cleanup());

const stampFor = (parentUuid: string | null): EntryStamp => ({ sessionId: 's1', cwd: '/repo', parentUuid });

describe('TranscriptStore', () => {
  it('appends a batch as whole JSON lines and reads it back', async () => {
    const store = new TranscriptStore(join(dir, 'proj', 's1.jsonl'));
    const a = createUserEntry(stampFor(null), 'hello');
    const b = createUserEntry(stampFor(a.uuid), 'again');
    expect(await store.append([a, b])).toHaveLength(2);
    const raw = await readFile(store.path, 'utf8');
    expect(raw.split('\n')).toEqual([JSON.stringify(a), JSON.stringify(b), '']);
    expect((await stat(store.path)).mode & 0o777).toBe(0o600);
    const { entries, invalid, tornTail } = await store.readAll();
    expect(entries).toEqual([a, b]);
    expect(invalid).toEqual([]);
    expect(tornTail).toBe(false);
  });

  it('skips chain entries whose uuid is already in the file, across store instances', async () => {
    const path = join(dir, 's.jsonl');
    const a = createUserEntry(stampFor(null), 'hello');
    await new TranscriptStore(path).append([a]);
    const second = new TranscriptStore(path);
    const b = createUserEntry(stampFor(a.uuid), 'next');
    expect(await second.append([a, b, b])).toEqual([b]);
    expect((await second.readAll()).entries.map((e) => e.uuid)).toEqual([a.uuid, b.uuid]);
  });

  it('always appends metadata entries without a uuid', async () => {
    const store = new TranscriptStore(join(dir, 's.jsonl'));
    const meta = { type: 'custom-title', customTitle: 'x', sessionId: 's1' };
    await store.append([meta]);
    await store.append([meta]);
    expect((await store.readAll()).entries).toEqual([meta, meta]);
  });

  it('serialises concurrent appends so lines never interleave', async () => {
    const store = new TranscriptStore(join(dir, 's.jsonl'));
    const root = createUserEntry(stampFor(null), 'root');
    const batches = Array.from({ length: 20 }, (_, i) =>
      Array.from({ length: 5 }, (_, j) =>
        createUserEntry(stampFor(root.uuid), `m${i}-${j}-${'x'.repeat(500)}`),
      ),
    );
    await Promise.all(batches.map((b) => store.append(b)));
    const { entries, invalid } = await store.readAll();
    expect(invalid).toEqual([]);
    expect(entries).toHaveLength(100);
  });

  it('tolerates a torn last line and invalid lines, reporting them', async () => {
    const path = join(dir, 's.jsonl');
    const a = createUserEntry(stampFor(null), 'ok');
    await writeFile(path, `${JSON.stringify(a)}\nnot json\n{"no":"type"}\n${JSON.stringify(a).slice(0, 30)}`);
    const { entries, invalid, tornTail } = await new TranscriptStore(path).readAll();
    expect(entries).toEqual([a]);
    expect(tornTail).toBe(true);
    expect(invalid.map((i) => i.line)).toEqual([2, 3, 4]);
    expect(invalid[0]!.reason).toMatch(/^not JSON/);
    expect(invalid[1]!.reason).toMatch(/^type:/);
    expect(invalid[2]!.reason).toMatch(/^torn last line/);
  });

  it('keeps a torn last line on its own line when appending after it', async () => {
    const path = join(dir, 's.jsonl');
    const a = createUserEntry(stampFor(null), 'first');
    await writeFile(path, JSON.stringify(a));
    await appendFile(path, '\n{"type":"user","uuid":"torn');
    const store = new TranscriptStore(path);
    const b = createUserEntry(stampFor(a.uuid), 'after the crash');
    await store.append([b]);
    const { entries, invalid } = await store.readAll();
    expect(entries).toEqual([a, b]);
    expect(invalid).toHaveLength(1);
  });

  it('refuses to append a chain entry missing required fields', async () => {
    const store = new TranscriptStore(join(dir, 's.jsonl'));
    const bad = { type: 'user', uuid: 'u1', message: { role: 'user' as const, content: 'x' } };
    await expect(store.append([bad])).rejects.toBeInstanceOf(TranscriptError);
    await expect(store.append([bad])).rejects.toThrow(/parentUuid/);
  });

  it('finds the newest leaf, ignoring entries that are parents and sidechains', async () => {
    const store = new TranscriptStore(join(dir, 's.jsonl'));
    expect(await store.leaf()).toBeUndefined();
    const a = createUserEntry(stampFor(null), 'a');
    const b = createUserEntry(stampFor(a.uuid), 'b');
    const side = createUserEntry(stampFor(b.uuid), 'side', { isSidechain: true });
    const saved = createSystemEntry(stampFor(b.uuid), 'memory_saved', 'Saved 1 memory');
    await store.append([a, b, saved, side]);
    expect((await store.leaf())?.uuid).toBe(saved.uuid);
  });

  it('re-reads the file whenever another writer appended, replaced or removed it since its last read', async () => {
    const path = join(dir, 's.jsonl');
    const reader = new TranscriptStore(path);
    const writer = new TranscriptStore(path);
    const a = createUserEntry(stampFor(null), 'hello');
    await writer.append([a]);
    expect((await reader.readAll()).entries).toEqual([a]);
    // Unchanged: the same entries again, in a fresh array the caller may change.
    const again = await reader.readAll();
    expect(again.entries).toEqual([a]);
    again.entries.push(a);
    expect((await reader.readAll()).entries).toEqual([a]);
    // Appended by another store.
    const b = createUserEntry(stampFor(a.uuid), 'next');
    await writer.append([b]);
    expect((await reader.readAll()).entries).toEqual([a, b]);
    // Replaced by a file of the same size (a new inode), then appended to by hand with a torn line.
    const c = createUserEntry(stampFor(null), 'hellO');
    const d = createUserEntry(stampFor(c.uuid), 'nexT');
    const replaced = `${[c, d].map((e) => JSON.stringify(e)).join('\n')}\n`;
    await writeFile(`${path}.new`, replaced);
    await rename(`${path}.new`, path);
    expect((await reader.readAll()).entries).toEqual([c, d]);
    await appendFile(path, '{"torn');
    expect(await reader.readAll()).toMatchObject({ entries: [c, d], tornTail: true });
    await rm(path);
    expect((await reader.readAll()).entries).toEqual([]);
  });

  it('a store that read the file first still skips the chain entries it holds when appending', async () => {
    const path = join(dir, 's.jsonl');
    const a = createUserEntry(stampFor(null), 'hello');
    await new TranscriptStore(path).append([a]);
    const store = new TranscriptStore(path);
    expect((await store.readAll()).entries).toEqual([a]);
    const b = createUserEntry(stampFor(a.uuid), 'next');
    expect(await store.append([a, b])).toEqual([b]);
    expect((await store.readAll()).entries).toEqual([a, b]);
  });

  it('reads a missing file as an empty transcript', async () => {
    expect(await new TranscriptStore(join(dir, 'none.jsonl')).readAll()).toEqual({
      entries: [],
      invalid: [],
      tornTail: false,
    });
  });
});

describe('parseTranscript', () => {
  it('keeps unknown fields of Claude Code entries', () => {
    const line = JSON.stringify({
      type: 'assistant',
      uuid: 'u',
      parentUuid: null,
      sessionId: 's',
      cwd: '/x',
      timestamp: '2025-01-01T00:00:00.000Z',
      version: '2.0.1',
      gitBranch: 'main',
      requestId: 'req_1',
      message: { role: 'assistant', content: [{ type: 'text', text: 'hi', citations: null }], model: 'm' },
    });
    const { entries } = parseTranscript(`${line}\n`);
    expect(entries[0]).toEqual(JSON.parse(line));
  });
});
