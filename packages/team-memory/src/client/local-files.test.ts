import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MARKER_PATH } from '@anthropic-ai/sdk/tools/agent-toolset/memories';
import { describe, expect, it } from 'vitest';
import { MAX_ENTRY_BYTES } from '../contract.js';
import {
  CLAUDE_CODE_MANIFEST,
  foreignMountsOf,
  readLocalBytes,
  readLocalTeamFiles,
  SDK_STORE_MARKER,
} from './local-files.js';

// The local side of team sync reads what a person, a model or another program left in team/: one bounded,
// non-blocking open judged on the descriptor, and another client's store mirror left out of the sync.

describe('readLocalBytes', () => {
  it('reads a regular file; a FIFO, a symlink or nothing reads as absent; over the cap only its size', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-local-bytes-'));
    writeFileSync(join(dir, 'note.md'), 'hello\n');
    expect(await readLocalBytes(join(dir, 'note.md'))).toEqual({ bytes: Buffer.from('hello\n') });
    // A FIFO named like a memory: the open does not block, and it is not read.
    execFileSync('mkfifo', [join(dir, 'pipe.md')]);
    expect(await readLocalBytes(join(dir, 'pipe.md'))).toBeUndefined();
    // A final symlink is never followed, even to a file inside team/.
    symlinkSync(join(dir, 'note.md'), join(dir, 'link.md'));
    expect(await readLocalBytes(join(dir, 'link.md'))).toBeUndefined();
    expect(await readLocalBytes(join(dir, 'missing.md'))).toBeUndefined();
    writeFileSync(join(dir, 'big.md'), 'x'.repeat(MAX_ENTRY_BYTES + 10));
    expect(await readLocalBytes(join(dir, 'big.md'))).toEqual({ tooLarge: MAX_ENTRY_BYTES + 10 });
    // Exactly at the cap is read (positive control for the limit).
    writeFileSync(join(dir, 'max.md'), 'x'.repeat(MAX_ENTRY_BYTES));
    expect((await readLocalBytes(join(dir, 'max.md'))) as { bytes: Buffer }).toMatchObject({
      bytes: expect.any(Buffer),
    });
  });
});

describe('foreign store mirrors in team/', () => {
  it("finds Claude Code's and the SDK's mirrors by their bookkeeping and leaves them out of the local files", async () => {
    const team = mkdtempSync(join(tmpdir(), 'engram-mounts-'));
    expect(SDK_STORE_MARKER).toBe(MARKER_PATH);
    mkdirSync(join(team, 'memstore_x', 'notes'), { recursive: true });
    writeFileSync(
      join(team, 'memstore_x', CLAUDE_CODE_MANIFEST),
      '{"v":1,"partition":"/v1/memory_stores/memstore_x"}',
    );
    writeFileSync(join(team, 'memstore_x', 'notes', 'a.md'), 'theirs\n');
    writeFileSync(join(team, 'memstore_x', 'notes', 'a.md.tmp.0a1b2c3d'), 'half');
    mkdirSync(join(team, 'agent'));
    writeFileSync(join(team, 'agent', SDK_STORE_MARKER), 'version 1\nmemstore_y');
    writeFileSync(join(team, 'agent', 'b.md'), 'sdk\n');
    // A folder with a marker that is not a regular file is not a mirror (positive control: its file syncs).
    mkdirSync(join(team, 'fake', CLAUDE_CODE_MANIFEST), { recursive: true });
    writeFileSync(join(team, 'fake', 'c.md'), 'ours\n');
    writeFileSync(join(team, 'ours.md'), 'ours\n');
    expect(await foreignMountsOf(team)).toEqual([
      { dir: 'agent', client: 'sdk' },
      { dir: 'memstore_x', client: 'claude-code' },
    ]);
    const local = await readLocalTeamFiles(team);
    expect([...local.entries.keys()]).toEqual(['fake/c.md', 'ours.md']);
    expect(local.skipped).toEqual([]);
  });
});
