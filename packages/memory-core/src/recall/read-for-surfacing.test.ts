import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  MAX_MEMORY_BYTES,
  MAX_MEMORY_LINES,
  readMemoriesForSurfacing,
  truncateMemoryHead,
} from './read-for-surfacing.js';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 10, 20, 12);

let root: string;
let memoryDir: string;
let cleanup: () => void;
beforeEach(() => {
  ({ dir: root, cleanup } = makeTempDir('engram-recall-read-'));
  memoryDir = join(root, 'memory');
  mkdirSync(memoryDir);
});
afterEach(() => cleanup());

function write(rel: string, content: string, ageDays = 0): string {
  const path = join(memoryDir, rel);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, content);
  const t = (NOW - ageDays * DAY) / 1000;
  utimesSync(path, t, t);
  return path;
}

describe.each(['auto', 'async'] as const)('readMemoriesForSurfacing (io: %s)', (io) => {
  const read = (filenames: string[], extra: { displayDir?: string; now?: number } = {}) =>
    readMemoriesForSurfacing({ memoryDir, filenames, now: NOW, io, ...extra });

  it('reads a small memory whole, with a "saved today" header', async () => {
    const text = '---\nname: pnpm\ndescription: use pnpm\ntype: feedback\n---\nAlways pnpm.\n';
    write('feedback_pnpm.md', text);
    const { memories, dropped } = await read(['feedback_pnpm.md']);
    expect(dropped).toEqual([]);
    expect(memories).toEqual([
      {
        path: 'feedback_pnpm.md',
        header: `Memory (saved today): ${join(memoryDir, 'feedback_pnpm.md')}:`,
        content: text,
        truncated: false,
        mtimeMs: NOW,
      },
    ]);
  });

  it('puts the freshness caveat in the header of a memory older than a day, and "yesterday" for one day', async () => {
    write('old.md', 'old fact\n', 9);
    write('sub/yday.md', 'recent fact\n', 1);
    const { memories } = await read(['old.md', 'sub/yday.md']);
    expect(memories[0]!.header).toMatch(/^This memory was last updated 9 days ago\./);
    expect(memories[0]!.header.endsWith(`\n\nMemory: ${join(memoryDir, 'old.md')}:`)).toBe(true);
    expect(memories[1]!.header).toBe(`Memory (saved yesterday): ${join(memoryDir, 'sub/yday.md')}:`);
  });

  it('computes byte-identical headers and contents on every read of an unchanged file', async () => {
    write('a.md', 'stable\n', 4);
    const first = await read(['a.md']);
    const second = await read(['a.md'], { now: NOW + 3_600_000 });
    expect(second.memories).toEqual(first.memories);
  });

  it('names the directory as the agent sees it when a display directory is given, and reads from the real one', async () => {
    write('a.md', 'x'.repeat(MAX_MEMORY_BYTES + 10));
    const { memories } = await read(['a.md'], { displayDir: '/home/dev/.engram/projects/-repo/memory' });
    expect(memories[0]!.header).toBe('Memory (saved today): /home/dev/.engram/projects/-repo/memory/a.md:');
    expect(memories[0]!.content).toContain(
      'The whole file is at /home/dev/.engram/projects/-repo/memory/a.md',
    );
  });

  it('cuts at 200 lines with a note pointing at the full file', async () => {
    const lines = Array.from({ length: 250 }, (_, i) => `l${i}`);
    const path = write('long.md', `${lines.join('\n')}\n`);
    const { memories } = await read(['long.md']);
    const m = memories[0]!;
    expect(m.truncated).toBe(true);
    expect(m.limit).toBe(MAX_MEMORY_LINES);
    expect(m.content).toBe(
      `${lines.slice(0, 200).join('\n')}\n\n> This memory was cut to its first 200 lines. The whole file is at ${path}; use the Read tool to see the rest.`,
    );
  });

  it('does not cut a file of exactly 200 lines', async () => {
    const text = `${Array.from({ length: 200 }, (_, i) => `l${i}`).join('\n')}\n`;
    write('exact.md', text);
    const { memories } = await read(['exact.md']);
    expect(memories[0]).toMatchObject({ truncated: false, content: text });
    expect(memories[0]).not.toHaveProperty('limit');
  });

  it('cuts at 4 KiB on a UTF-8 character boundary with a note', async () => {
    // 4095 ASCII bytes then a 3-byte character straddling the limit.
    const path = write('big.md', `${'a'.repeat(MAX_MEMORY_BYTES - 1)}€ and more text`);
    const { memories } = await read(['big.md']);
    const m = memories[0]!;
    expect(m.truncated).toBe(true);
    expect(m.content).toBe(
      `${'a'.repeat(MAX_MEMORY_BYTES - 1)}\n\n> This memory was cut at 4096 bytes. The whole file is at ${path}; use the Read tool to see the rest.`,
    );
    expect(m.content).not.toContain('\uFFFD');
  });

  it('drops a symlink that points outside the memory directory, and reads one that stays inside', async () => {
    writeFileSync(join(root, 'secret.md'), 'TOP SECRET\n');
    symlinkSync(join(root, 'secret.md'), join(memoryDir, 'leak.md'));
    write('real.md', 'inside\n');
    symlinkSync(join(memoryDir, 'real.md'), join(memoryDir, 'alias.md'));
    mkdirSync(join(root, 'outside-dir'));
    writeFileSync(join(root, 'outside-dir', 'x.md'), 'TOP SECRET\n');
    symlinkSync(join(root, 'outside-dir'), join(memoryDir, 'linked-dir'));
    const { memories, dropped } = await read(['leak.md', 'alias.md', 'linked-dir/x.md', '../secret.md']);
    expect(memories.map((m) => [m.path, m.content])).toEqual([['alias.md', 'inside\n']]);
    expect(dropped.map((d) => [d.path, d.reason])).toEqual([
      ['leak.md', 'outside-memory-dir'],
      ['linked-dir/x.md', 'outside-memory-dir'],
      ['../secret.md', 'outside-memory-dir'],
    ]);
    expect(JSON.stringify(memories)).not.toContain('TOP SECRET');
  });

  it('drops missing files, directories, FIFOs and unreadable files without throwing', async () => {
    mkdirSync(join(memoryDir, 'dir.md'));
    execFileSync('mkfifo', [join(memoryDir, 'pipe.md')]);
    const locked = write('locked.md', 'no access\n');
    chmodSync(locked, 0o000);
    write('ok.md', 'fine\n');
    const { memories, dropped } = await read(['missing.md', 'dir.md', 'pipe.md', 'locked.md', 'ok.md']);
    expect(memories.map((m) => m.path)).toEqual(
      process.getuid?.() === 0 ? ['locked.md', 'ok.md'] : ['ok.md'], // root reads 0000 files
    );
    expect(dropped.map((d) => [d.path, d.reason])).toEqual([
      ['missing.md', 'unreadable'],
      ['dir.md', 'not-a-file'],
      ['pipe.md', 'not-a-file'],
      ...(process.getuid?.() === 0 ? [] : [['locked.md', 'unreadable']]),
    ]);
  });
});

describe('truncateMemoryHead', () => {
  it('keeps a short complete file whole', () => {
    expect(truncateMemoryHead(Buffer.from('a\nb\n'), true)).toEqual({
      text: 'a\nb\n',
      truncated: undefined,
      lines: 2,
    });
    expect(truncateMemoryHead(Buffer.from(''), true)).toEqual({ text: '', truncated: undefined, lines: 0 });
  });

  it('keeps exactly 4096 bytes of a complete file whole, and cuts a longer one', () => {
    const exact = Buffer.from('b'.repeat(MAX_MEMORY_BYTES));
    expect(truncateMemoryHead(exact, true).truncated).toBeUndefined();
    const longer = Buffer.from('b'.repeat(MAX_MEMORY_BYTES + 1));
    expect(truncateMemoryHead(longer, false)).toMatchObject({
      truncated: 'bytes',
      text: 'b'.repeat(MAX_MEMORY_BYTES),
    });
  });

  it('prefers the line cut when 200 lines end inside the byte budget', () => {
    const head = Buffer.from(`${'x\n'.repeat(300)}`);
    expect(truncateMemoryHead(head, true)).toEqual({
      text: Array(200).fill('x').join('\n'),
      truncated: 'lines',
      lines: 200,
    });
  });

  it('never splits a 4-byte character', () => {
    const head = Buffer.from(`${'a'.repeat(MAX_MEMORY_BYTES - 2)}😀😀`);
    const cut = truncateMemoryHead(head, true);
    expect(cut.text).toBe('a'.repeat(MAX_MEMORY_BYTES - 2));
    expect(Buffer.byteLength(cut.text)).toBeLessThanOrEqual(MAX_MEMORY_BYTES);
  });
});
