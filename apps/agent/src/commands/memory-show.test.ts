import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { describe, expect, it } from 'vitest';
import { loadAgentConfig } from '../config.js';
import { memoryShow } from './memory.js';

describe('engram memory show', () => {
  it('prints the memory, then its [[links]] (dangling ones flagged) and its backlinks', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-show-'));
    const cwd = join(home, 'project');
    mkdirSync(cwd, { recursive: true });
    const config = loadAgentConfig({ HOME: home, ENGRAM_HOME: home, ANTHROPIC_API_KEY: 'test' });
    const { memoryDir } = await resolveEngramPaths({ engramHome: home, cwd });
    mkdirSync(memoryDir, { recursive: true });
    const text = '---\nname: no-database-mocks\n---\nSee [[testing-policy]] and [[db-setup]].\n';
    writeFileSync(join(memoryDir, 'no-database-mocks.md'), text);
    writeFileSync(
      join(memoryDir, 'feedback_testing.md'),
      '---\nname: testing-policy\n---\nBack to [[no-database-mocks]].\n',
    );
    const out: string[] = [];
    const code = await memoryShow(
      config,
      { cwd, file: 'no-database-mocks.md' },
      { out: (t) => out.push(t), err: () => {} },
    );
    expect(code).toBe(0);
    expect(out).toEqual([
      text,
      '---- links\n  [[testing-policy]] → feedback_testing.md\n  [[db-setup]] (dangling: no memory has this name yet)',
      '---- backlinks\n  feedback_testing.md',
    ]);
  });
});
