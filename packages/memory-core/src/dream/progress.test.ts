import { describe, expect, it } from 'vitest';
import { advanceDreamProgress, initialDreamProgress } from './progress.js';

const dirs = { memoryDir: '/h/p/memory', transcriptDir: '/h/p' };

describe('advanceDreamProgress', () => {
  it('moves orient → gather → consolidate → prune on the first matching calls, never backwards', () => {
    let s = initialDreamProgress();
    s = advanceDreamProgress(s, [{ name: 'Read', input: { file_path: '/h/p/memory/MEMORY.md' } }], dirs);
    expect(s).toEqual({ phase: 'orient', filesTouched: [], turns: 1 });
    s = advanceDreamProgress(s, [{ name: 'Grep', input: { pattern: 'pnpm', path: '/h/p/s1.jsonl' } }], dirs);
    expect(s.phase).toBe('gather');
    s = advanceDreamProgress(
      s,
      [
        { name: 'Write', input: { file_path: '/h/p/memory/pnpm.md', content: 'x' } },
        { name: 'Write', input: { file_path: '/h/p/memory/team/a.md', content: 'x' } },
      ],
      dirs,
    );
    expect(s).toMatchObject({ phase: 'consolidate', filesTouched: ['pnpm.md', 'team/a.md'], turns: 3 });
    s = advanceDreamProgress(s, [{ name: 'Edit', input: { file_path: '/h/p/memory/MEMORY.md' } }], dirs);
    expect(s.phase).toBe('prune');
    s = advanceDreamProgress(s, [{ name: 'Grep', input: { path: '/h/p' } }], dirs);
    s = advanceDreamProgress(s, [{ name: 'Write', input: { file_path: '/h/p/memory/pnpm.md' } }], dirs);
    expect(s).toMatchObject({ phase: 'prune', filesTouched: ['pnpm.md', 'team/a.md', 'MEMORY.md'] });
  });

  it('ignores writes outside the memory directory', () => {
    const s = advanceDreamProgress(
      initialDreamProgress(),
      [
        { name: 'Write', input: { file_path: '/etc/passwd' } },
        { name: 'Write', input: { file_path: '/h/p/memory/../escape.md' } },
        { name: 'Write', input: { file_path: '/h/p/memory/.history/x/a.md' } },
      ],
      dirs,
    );
    expect(s).toEqual({ phase: 'orient', filesTouched: [], turns: 1 });
  });
});
