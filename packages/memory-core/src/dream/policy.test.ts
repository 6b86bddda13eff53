import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { consolidationPolicy } from './policy.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('consolidationPolicy', () => {
  it('allows memory writes but not into .history or the lock file, and keeps the base rules', async () => {
    const t = makeTempDir();
    cleanups.push(t.cleanup);
    const mem = join(t.dir, 'memory');
    mkdirSync(join(mem, '.history'), { recursive: true });
    const denials: string[] = [];
    const policy = consolidationPolicy(mem, { onDenial: (d) => denials.push(`${d.tool}:${d.reason}`) });
    const write = (file_path: string) => policy({ name: 'Write' }, { file_path, content: 'x' });
    expect((await write(join(mem, 'topic.md'))).behavior).toBe('allow');
    expect((await write(join(mem, 'team', 'x.md'))).behavior).toBe('allow');
    const history = await write(join(mem, '.history', 'snap', 'a.md'));
    expect(history).toMatchObject({ behavior: 'deny', reason: 'hidden_path' });
    expect((await policy({ name: 'Edit' }, { file_path: join(mem, '.consolidate-lock') })).behavior).toBe(
      'deny',
    );
    expect((await write(join(t.dir, 'outside.md'))).behavior).toBe('deny');
    expect((await policy({ name: 'Read' }, { file_path: join(mem, '.history') })).behavior).toBe('allow');
    expect(denials).toEqual(['Write:hidden_path', 'Edit:hidden_path', 'Write:path_outside_memory']);
  });
});
