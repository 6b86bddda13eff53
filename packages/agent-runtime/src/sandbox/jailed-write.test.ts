import { linkSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jailLayout, listing, useTempDirs } from '../fixtures.test-helpers.js';
import { type JailedWriteError, writeFileJailed } from './jailed-write.js';

const { tempDir } = useTempDirs();
const layout = async () => jailLayout(await tempDir());

describe('writeFileJailed', () => {
  it('writes atomically below the root, creating directories, keeping an existing mode', async () => {
    const { mem } = await layout();
    await writeFileJailed(mem, join(mem, 'a', 'b', 'c.md'), 'one', { mode: 0o640, dirMode: 0o750 });
    expect(readFileSync(join(mem, 'a', 'b', 'c.md'), 'utf8')).toBe('one');
    expect(statSync(join(mem, 'a', 'b', 'c.md')).mode & 0o777).toBe(0o640);
    expect(statSync(join(mem, 'a')).mode & 0o777).toBe(0o750);
    await writeFileJailed(mem, join(mem, 'a', 'b', 'c.md'), 'two', { mode: 0o600 });
    expect(readFileSync(join(mem, 'a', 'b', 'c.md'), 'utf8')).toBe('two');
    expect(statSync(join(mem, 'a', 'b', 'c.md')).mode & 0o777).toBe(0o640);
    expect(listing(mem)).toEqual(['a', 'a/b', 'a/b/c.md']);
  });

  it('refuses, naming the reason: outside the root, a symlinked file or directory, a hard link', async () => {
    const { base, mem, outside } = await layout();
    symlinkSync(outside, join(mem, 'dirlink'));
    symlinkSync(join(outside, 'target.md'), join(mem, 'filelink.md'));
    linkSync(join(outside, 'target.md'), join(mem, 'hard.md'));
    const refusal = (target: string) =>
      writeFileJailed(mem, target, 'pwned').then(
        () => 'written',
        (e: JailedWriteError) => e.code,
      );
    expect(await refusal(join(base, 'x.md'))).toBe('OUTSIDE_ROOT');
    expect(await refusal(`${mem}/../outside/target.md`)).toBe('OUTSIDE_ROOT');
    expect(await refusal(join(mem, 'dirlink', 'target.md'))).toBe('SYMLINK_IN_PATH');
    expect(await refusal(join(mem, 'dirlink', 'new', 'x.md'))).toBe('SYMLINK_IN_PATH');
    expect(await refusal(join(mem, 'filelink.md'))).toBe('SYMLINK_IN_PATH');
    expect(await refusal(join(mem, 'hard.md'))).toBe('HARD_LINK');
    expect(await refusal(mem)).toBe('OUTSIDE_ROOT');
    expect(readFileSync(join(outside, 'target.md'), 'utf8')).toBe('untouched\n');
    expect(listing(outside)).toEqual(['target.md']);
  });
});
