import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  checkTeamSecret,
  DENIAL_REASONS,
  isDenied,
  MAX_MEMORY_WRITE_BYTES,
  memoryWritePolicy,
  type PermissionDenial,
  sessionMemoryPolicy,
  type ToolDescriptor,
} from './memory-permissions.js';

let base: string;
let mem: string;
let cleanup: () => void;
// Built at run time from a varied body (the scanner ignores periodic filler such as 'Zx9Zx9…' as a placeholder).
const token = () => ['ghp', 'Zx9Qm2Lr7Tk4Wb8Nc3Hd5Jf6Vg1Ps0YaEu6R'].join('_');
const tool = (name: string, isReadOnly?: ToolDescriptor['isReadOnly']): ToolDescriptor =>
  isReadOnly ? { name, isReadOnly } : { name };

beforeAll(() => {
  ({ dir: base, cleanup } = makeTempDir('engram-policy-'));
  mem = join(base, 'memory');
  mkdirSync(join(mem, 'team'), { recursive: true });
  mkdirSync(join(base, 'outside', 'secret-place'), { recursive: true });
  symlinkSync('../outside', join(mem, 'escape'));
});
afterAll(() => cleanup());

describe('memoryWritePolicy', () => {
  const denials: PermissionDenial[] = [];
  const policy = () => memoryWritePolicy(mem, { onDenial: (d) => denials.push(d) });

  it.each(['Read', 'Grep', 'Glob'])('allows %s anywhere', async (name) => {
    expect(await policy()(tool(name), { file_path: '/etc/passwd', pattern: 'x' })).toEqual({
      behavior: 'allow',
    });
  });

  it('allows Bash only when the tool reports the input read-only', async () => {
    expect(
      await policy()(
        tool('Bash', () => true),
        { command: 'ls' },
      ),
    ).toEqual({ behavior: 'allow' });
    for (const bash of [
      tool('Bash', () => false),
      tool('Bash'),
      tool('Bash', () => {
        throw new Error('parse failure');
      }),
    ]) {
      const decision = await policy()(bash, { command: 'rm -rf /' });
      expect(decision).toMatchObject({ behavior: 'deny', reason: 'bash_not_read_only' });
      if (isDenied(decision)) expect(decision.message).toMatch(/read-only shell commands/);
    }
  });

  it.each(['Edit', 'Write'])('allows %s inside the memory directory (new and nested files)', async (name) => {
    for (const target of [
      join(mem, 'a.md'),
      join(mem, 'new', 'deep.md'),
      `${mem}/sub/../b.md`,
      join(mem, 'team', 'c.md'),
    ]) {
      expect(await policy()(tool(name), { file_path: target, content: 'x', new_string: 'x' })).toEqual({
        behavior: 'allow',
      });
    }
  });

  it.each(['Edit', 'Write'])('denies %s outside, without echoing the outside path', async (name) => {
    const outside = join(base, 'outside', 'secret-place', 'x.md');
    for (const target of [
      outside,
      `${mem}/../outside/secret-place/x.md`,
      join(mem, 'escape', 'secret-place', 'x.md'),
      `${mem}-evil/x.md`,
      'relative.md',
      '~/x.md',
    ]) {
      const decision = await policy()(tool(name), { file_path: target, content: 'x' });
      expect(decision).toMatchObject({ behavior: 'deny', reason: 'path_outside_memory' });
      if (isDenied(decision)) {
        expect(decision.message).toContain(mem);
        expect(decision.message).not.toContain('secret-place');
        expect(decision.message).toMatch(/only allowed for files inside the memory directory/);
      }
    }
  });

  it('denies Edit/Write without a usable file_path', async () => {
    for (const input of [{}, { file_path: '' }, { file_path: 42 }]) {
      expect(await policy()(tool('Write'), input)).toMatchObject({
        behavior: 'deny',
        reason: 'missing_file_path',
      });
    }
  });

  it('refuses secrets written into team memory (Write content and Edit new_string), not into private memory', async () => {
    const write = await policy()(tool('Write'), {
      file_path: join(mem, 'team', 'creds.md'),
      content: `use ${token()}`,
    });
    expect(write).toMatchObject({ behavior: 'deny', reason: 'team_secret' });
    if (isDenied(write)) {
      expect(write.message).toMatch(/GitHub personal access token/);
      expect(write.message).not.toContain(token());
    }
    const edit = await policy()(tool('Edit'), {
      file_path: join(mem, 'team', 'creds.md'),
      old_string: 'a',
      new_string: token(),
    });
    expect(edit).toMatchObject({ behavior: 'deny', reason: 'team_secret' });
    expect(await policy()(tool('Write'), { file_path: join(mem, 'private.md'), content: token() })).toEqual({
      behavior: 'allow',
    });
  });

  it('honours a custom team directory', async () => {
    const custom = memoryWritePolicy(mem, { teamDir: join(mem, 'shared') });
    expect(
      await custom(tool('Write'), { file_path: join(mem, 'shared', 'x.md'), content: token() }),
    ).toMatchObject({
      reason: 'team_secret',
    });
    expect(await custom(tool('Write'), { file_path: join(mem, 'team', 'x.md'), content: token() })).toEqual({
      behavior: 'allow',
    });
  });

  it.each(['Agent', 'WebFetch', 'MultiEdit', 'NotebookEdit', 'mcp__github__create_issue', 'REPL', 'bash'])(
    'denies %s with a message listing what is allowed',
    async (name) => {
      const decision = await policy()(tool(name), { file_path: join(mem, 'a.md') });
      expect(decision).toMatchObject({ behavior: 'deny', reason: 'tool_not_allowed' });
      if (isDenied(decision)) {
        expect(decision.message).toContain(`${name} is not available to the memory agent`);
        expect(decision.message).toContain(`Edit and Write for files inside ${mem}`);
      }
    },
  );

  it('reports each denial by tool and reason for metrics', async () => {
    denials.length = 0;
    const p = policy();
    await p(tool('Agent'), {});
    await p(tool('Bash'), { command: 'touch x' });
    await p(tool('Write'), { file_path: '/etc/x' });
    await p(tool('Read'), {});
    expect(denials).toEqual([
      { tool: 'Agent', reason: 'tool_not_allowed' },
      { tool: 'Bash', reason: 'bash_not_read_only' },
      { tool: 'Write', reason: 'path_outside_memory' },
    ]);
    for (const d of denials) expect(DENIAL_REASONS).toContain(d.reason);
  });
});

describe('memoryWritePolicy: the narrower write rules', () => {
  beforeAll(() => {
    mkdirSync(join(mem, 'real-dir'), { recursive: true });
    mkdirSync(join(mem, '.history', 'snap-1'), { recursive: true });
    writeFileSync(join(mem, 'real-dir', 'inner.md'), 'x');
    writeFileSync(join(base, 'outside', 'linked.md'), 'outside');
    symlinkSync('real-dir', join(mem, 'alias-dir'));
    symlinkSync('real-dir/inner.md', join(mem, 'alias.md'));
    linkSync(join(base, 'outside', 'linked.md'), join(mem, 'hard.md'));
    writeFileSync(join(mem, 'big.md'), 'a'.repeat(MAX_MEMORY_WRITE_BYTES - 10));
  });
  const denial = async (name: string, input: Record<string, unknown>, opts = {}) => {
    const decision = await memoryWritePolicy(mem, opts)(tool(name), input);
    return decision.behavior === 'deny' ? decision.reason : 'allow';
  };

  it.each(['Write', 'Edit'])(
    '%s: refuses every hidden entry, anywhere below the memory directory',
    async (name) => {
      for (const rel of [
        '.history/snap-1/.snapshot.json',
        '.history/snap-1/a.md',
        '.consolidate-lock',
        '.git/config',
        '.git/hooks/pre-commit',
        '.gitconfig',
        '.hidden.md',
        'team/.secret.md',
        'sub/.git/x.md',
      ]) {
        expect(await denial(name, { file_path: join(mem, rel), content: 'x', new_string: 'x' })).toBe(
          'hidden_path',
        );
      }
    },
  );

  it('refuses files that are not Markdown', async () => {
    for (const rel of ['notes.txt', 'a.md.sh', 'script', 'x.MD', 'dir/.md', 'a.json']) {
      expect(await denial('Write', { file_path: join(mem, rel), content: 'x' })).toMatch(
        /not_markdown|hidden_path/,
      );
    }
    expect(await denial('Write', { file_path: join(mem, 'notes.txt'), content: 'x' })).toBe('not_markdown');
  });

  it('allows the index only at the top of the memory or team directory, and only where the job needs it', async () => {
    expect(await denial('Write', { file_path: join(mem, 'MEMORY.md'), content: 'x' })).toBe('allow');
    expect(await denial('Write', { file_path: join(mem, 'team', 'MEMORY.md'), content: 'x' })).toBe('allow');
    expect(await denial('Write', { file_path: join(mem, 'sub', 'MEMORY.md'), content: 'x' })).toBe(
      'entrypoint_not_allowed',
    );
    expect(
      await denial('Write', { file_path: join(mem, 'MEMORY.md'), content: 'x' }, { allowEntrypoint: false }),
    ).toBe('entrypoint_not_allowed');
    expect(
      await denial('Write', { file_path: join(mem, 'topic.md'), content: 'x' }, { allowEntrypoint: false }),
    ).toBe('allow');
  });

  it('refuses a symlink anywhere on the path (even one that stays inside) and a hard link', async () => {
    expect(await denial('Write', { file_path: join(mem, 'alias-dir', 'inner.md'), content: 'x' })).toBe(
      'symlink_in_path',
    );
    expect(await denial('Write', { file_path: join(mem, 'alias-dir', 'new.md'), content: 'x' })).toBe(
      'symlink_in_path',
    );
    expect(await denial('Edit', { file_path: join(mem, 'alias.md'), old_string: 'x', new_string: 'y' })).toBe(
      'symlink_in_path',
    );
    expect(await denial('Write', { file_path: join(mem, 'hard.md'), content: 'x' })).toBe('hard_link');
    expect(await denial('Write', { file_path: join(mem, 'real-dir', 'inner.md'), content: 'x' })).toBe(
      'allow',
    );
  });

  it('bounds the size a Write or Edit leaves in the file', async () => {
    const over = 'b'.repeat(MAX_MEMORY_WRITE_BYTES + 1);
    expect(await denial('Write', { file_path: join(mem, 'huge.md'), content: over })).toBe('too_large');
    expect(
      await denial('Edit', { file_path: join(mem, 'big.md'), old_string: 'a', new_string: 'a'.repeat(20) }),
    ).toBe('too_large');
    expect(
      await denial('Edit', { file_path: join(mem, 'big.md'), old_string: 'a'.repeat(100), new_string: 'c' }),
    ).toBe('allow');
    expect(
      await denial('Write', { file_path: join(mem, 'huge.md'), content: over }, { maxBytes: 2 ** 30 }),
    ).toBe('allow');
  });

  it('names each reason in the message, and is a plain function: nothing (no jail) is attached to it', async () => {
    const policy = memoryWritePolicy(mem);
    expect(Object.keys(policy)).toEqual([]);
    const decision = await policy(tool('Write'), { file_path: join(mem, '.git', 'config'), content: 'x' });
    expect(decision).toMatchObject({ behavior: 'deny', reason: 'hidden_path' });
    if (isDenied(decision)) expect(decision.message).toMatch(/hidden files and directories/);
    for (const reason of [
      'hidden_path',
      'not_markdown',
      'entrypoint_not_allowed',
      'too_large',
      'symlink_in_path',
      'hard_link',
    ]) {
      expect(DENIAL_REASONS).toContain(reason);
    }
  });
});

describe('sessionMemoryPolicy', () => {
  let summary: string;
  beforeAll(() => {
    summary = join(base, 'proj', 's1', 'session-memory', 'summary.md');
    mkdirSync(join(base, 'proj', 's1', 'session-memory'), { recursive: true });
    writeFileSync(summary, '# Session notes\n');
  });

  it('allows Edit on exactly the summary file, however it is spelled', async () => {
    const policy = sessionMemoryPolicy(summary);
    expect(await policy(tool('Edit'), { file_path: summary })).toEqual({ behavior: 'allow' });
    expect(await policy(tool('Edit'), { file_path: `${summary}/../summary.md` })).toEqual({
      behavior: 'allow',
    });
  });

  it('denies every other file and every other tool', async () => {
    const denials: PermissionDenial[] = [];
    const policy = sessionMemoryPolicy(summary, { onDenial: (d) => denials.push(d) });
    const sibling = join(base, 'proj', 's1', 'session-memory', 'other.md');
    expect(await policy(tool('Edit'), { file_path: sibling })).toMatchObject({ reason: 'not_summary_file' });
    expect(await policy(tool('Edit'), { file_path: '/etc/passwd' })).toMatchObject({
      reason: 'not_summary_file',
    });
    expect(await policy(tool('Edit'), {})).toMatchObject({ reason: 'missing_file_path' });
    for (const name of ['Write', 'Read', 'Bash', 'Grep']) {
      const decision = await policy(
        tool(name, () => true),
        { file_path: summary },
      );
      expect(decision).toMatchObject({ behavior: 'deny', reason: 'tool_not_allowed' });
      if (isDenied(decision))
        expect(decision.message).toBe(`Only Edit on the session notes file ${summary} is allowed here.`);
    }
    expect(denials).toHaveLength(7);
  });

  it('refuses a summary file that is a symlink leading out of its directory', async () => {
    const dir = join(base, 'proj', 's2', 'session-memory');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(base, 'outside', 'target.md'), 'x');
    symlinkSync('../../../outside/target.md', join(dir, 'summary.md'));
    const policy = sessionMemoryPolicy(join(dir, 'summary.md'));
    expect(await policy(tool('Edit'), { file_path: join(dir, 'summary.md') })).toMatchObject({
      behavior: 'deny',
    });
  });

  it('refuses a summary file with another hard link, and is a plain function (no jail attached)', async () => {
    const dir = join(base, 'proj', 's3', 'session-memory');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(base, 'outside', 'notes-target.md'), 'x');
    linkSync(join(base, 'outside', 'notes-target.md'), join(dir, 'summary.md'));
    const policy = sessionMemoryPolicy(join(dir, 'summary.md'));
    expect(Object.keys(policy)).toEqual([]);
    expect(await policy(tool('Edit'), { file_path: join(dir, 'summary.md') })).toMatchObject({
      behavior: 'deny',
      reason: 'hard_link',
    });
  });
});

describe('checkTeamSecret', () => {
  it('passes files outside the team directory and clean content, and names the rule otherwise', async () => {
    const team = join(mem, 'team');
    expect(await checkTeamSecret(join(mem, 'a.md'), token(), team)).toEqual({ ok: true });
    expect(await checkTeamSecret(join(team, 'a.md'), 'no secrets here', team)).toEqual({ ok: true });
    const result = await checkTeamSecret(join(team, 'a.md'), `x ${token()} y`, team);
    expect(result).toMatchObject({
      ok: false,
      ruleIds: ['github-pat'],
      labels: ['GitHub personal access token'],
    });
  });
});
