import { existsSync, promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { betaMemoryTool } from '@anthropic-ai/sdk/helpers/beta/memory';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { reply, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { memoryQueueConfig } from './hooks.js';
import { engramMemoryTool, MemoryToolRefusal } from './memory-tool.js';

// The Messages API memory tool (`memory_20250818`) through the SDK's own tool runner
// (`client.beta.messages.toolRunner` with `betaMemoryTool(handlers)`), against the scripted model over HTTP:
// the model's tool calls land in an Engram memory directory through the fork write policy, the secret guard,
// atomic writes and index upkeep; hostile calls come back as tool errors and leave the disk as it was.

const scripted = useModelServer({ requireScripted: true });
const { closer } = scripted;

const FACT =
  '---\nname: Deploy region\ndescription: Deploys go to region ams\ntype: project\n---\nWe deploy to ams.\n';
const SECRET = 'The deploy key is ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R.\n';

function memoryDir(): string {
  return join(mkdtempSync(join(tmpdir(), 'engram-memtool-')), 'memory');
}

async function indexFiles(dir: string): Promise<string[]> {
  return parseIndexEntries(await fs.readFile(join(dir, 'MEMORY.md'), 'utf8').catch(() => '')).map(
    (e) => e.file,
  );
}

/** Snapshot of every file under `dir` (path → content), to prove a refused call wrote nothing. */
async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string, rel: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = join(d, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(p, r);
      else out[r] = e.isSymbolicLink() ? `-> ${await fs.readlink(p)}` : await fs.readFile(p, 'utf8');
    }
  };
  await walk(dir, '');
  return out;
}

/** One tool-runner conversation: the model makes `calls` (one per turn), then says done. */
async function runConversation(
  handlers: ReturnType<typeof engramMemoryTool>,
  calls: Record<string, unknown>[],
) {
  scripted.server.script(
    ...calls.map((input, i) => reply(toolUse('memory', input, `toolu_mem_${i}`))),
    textReply('Done.'),
  );
  const client = new Anthropic({ apiKey: 'test', baseURL: scripted.server.url, maxRetries: 0 });
  const runner = client.beta.messages.toolRunner({
    model: 'claude-sonnet-5-5',
    max_tokens: 1024,
    messages: [{ role: 'user', content: 'Remember that we deploy to region ams.' }],
    tools: [betaMemoryTool(handlers)],
  });
  const final = await runner.runUntilDone();
  // The tool results the runner sent back, in order (one per call).
  const results = scripted.server
    .messageRequests()
    .slice(1)
    .map((r) => {
      const messages = (r.body as { messages: { role: string; content: unknown }[] }).messages;
      const last = messages.at(-1)!;
      const block = (last.content as { type: string; content: unknown; is_error?: boolean }[]).find(
        (b) => b.type === 'tool_result',
      )!;
      const text = typeof block.content === 'string' ? block.content : JSON.stringify(block.content);
      return { isError: block.is_error === true, text };
    });
  return { final, results };
}

describe('engramMemoryTool through the SDK tool runner', () => {
  it('the model creates a memory: the file lands atomically and MEMORY.md gets its pointer', async () => {
    const dir = memoryDir();
    const changes: unknown[] = [];
    const handlers = engramMemoryTool({ memoryDir: dir, onChange: (c) => void changes.push(c) });
    const { final, results } = await runConversation(handlers, [
      { command: 'view', path: '/memories' },
      { command: 'create', path: '/memories/project_deploy.md', file_text: FACT },
      { command: 'view', path: '/memories/project_deploy.md' },
    ]);
    expect(final.content).toEqual([expect.objectContaining({ type: 'text', text: 'Done.' })]);
    expect(results.map((r) => r.isError)).toEqual([false, false, false]);
    expect(results[1]!.text).toContain('File created successfully at: /memories/project_deploy.md');
    expect(results[2]!.text).toContain('We deploy to ams.');
    expect(await fs.readFile(join(dir, 'project_deploy.md'), 'utf8')).toBe(FACT);
    expect((await fs.stat(join(dir, 'project_deploy.md'))).mode & 0o777).toBe(0o600);
    expect(await indexFiles(dir)).toEqual(['project_deploy.md']);
    expect(await fs.readFile(join(dir, 'MEMORY.md'), 'utf8')).toContain('Deploy region');
    expect(changes).toEqual([{ kind: 'create', file: 'project_deploy.md' }]);
    // No temporary file is left beside it.
    expect((await fs.readdir(dir)).sort()).toEqual(['.index-titles.json', 'MEMORY.md', 'project_deploy.md']);
  });

  it('hostile paths, a symlink, a secret and an index edit are tool errors and write nothing; the same call inside succeeds', async () => {
    const dir = memoryDir();
    const outside = mkdtempSync(join(tmpdir(), 'engram-memtool-outside-'));
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(join(dir, 'project_deploy.md'), FACT);
    await fs.symlink(outside, join(dir, 'escape'));
    // Symlinks that stay inside are refused too: the memory is plain files, and a link is never followed.
    await fs.mkdir(join(dir, 'real'));
    await fs.symlink(join(dir, 'real'), join(dir, 'alias'));
    await fs.symlink(join(dir, 'project_deploy.md'), join(dir, 'link.md'));
    const before = await tree(dir);
    const handlers = engramMemoryTool({ memoryDir: dir });
    const hostile = [
      { command: 'create', path: '/memories/../../evil.md', file_text: FACT },
      { command: 'create', path: '/etc/evil.md', file_text: FACT },
      { command: 'create', path: '/memories/escape/evil.md', file_text: FACT },
      { command: 'view', path: '/memories/escape' },
      { command: 'create', path: '/memories/alias/evil.md', file_text: FACT },
      { command: 'view', path: '/memories/link.md' },
      { command: 'str_replace', path: '/memories/link.md', old_str: 'We deploy', new_str: 'We ship' },
      { command: 'create', path: '/memories/keys.md', file_text: SECRET },
      { command: 'str_replace', path: '/memories/project_deploy.md', old_str: 'We deploy', new_str: SECRET },
      { command: 'create', path: '/memories/MEMORY.md', file_text: '- [x](x.md) — y\n' },
      { command: 'create', path: '/memories/.hidden.md', file_text: FACT },
      { command: 'create', path: '/memories/notes.txt', file_text: 'plain' },
      { command: 'rename', old_path: '/memories/project_deploy.md', new_path: '/memories/escape/moved.md' },
      { command: 'delete', path: '/memories/escape' },
      { command: 'create', path: '/memories/big.md', file_text: `${FACT}${'x'.repeat(300 * 1024)}` },
    ];
    const { results } = await runConversation(handlers, hostile);
    expect(results.map((r) => r.isError)).toEqual(hostile.map(() => true));
    const codes = results.map((r) => /\[([A-Z_]+)\]/.exec(r.text)?.[1]);
    expect(codes).toEqual([
      'INVALID_MEMORY_PATH',
      'INVALID_MEMORY_PATH',
      'OUTSIDE_MEMORY_DIR',
      'OUTSIDE_MEMORY_DIR',
      'SYMLINK_IN_PATH',
      'SYMLINK_IN_PATH',
      'SYMLINK_IN_PATH',
      'SECRET_IN_MEMORY',
      'SECRET_IN_MEMORY',
      'INDEX_NOT_EDITABLE',
      'INVALID_MEMORY_PATH',
      'INVALID_MEMORY_FILE',
      'OUTSIDE_MEMORY_DIR',
      'OUTSIDE_MEMORY_DIR',
      'WRITE_DENIED_TOO_LARGE',
    ]);
    expect(await tree(dir)).toEqual(before);
    expect(await fs.readdir(outside)).toEqual([]);
    expect(existsSync(join(dir, '..', '..', 'evil.md'))).toBe(false);

    // Positive control: the same kinds of call, inside the memory directory, succeed.
    scripted.server.reset();
    const ok = await runConversation(handlers, [
      {
        command: 'create',
        path: '/memories/team_notes.md',
        file_text: FACT.replace('Deploy region', 'Team notes'),
      },
      {
        command: 'str_replace',
        path: '/memories/project_deploy.md',
        old_str: 'ams.',
        new_str: 'ams and fra.',
      },
      { command: 'rename', old_path: '/memories/team_notes.md', new_path: '/memories/sub/notes.md' },
      { command: 'view', path: '/memories' },
    ]);
    expect(ok.results.map((r) => r.isError)).toEqual([false, false, false, false]);
    expect(await fs.readFile(join(dir, 'project_deploy.md'), 'utf8')).toContain('ams and fra.');
    expect(existsSync(join(dir, 'team_notes.md'))).toBe(false);
    expect(await fs.readFile(join(dir, 'sub', 'notes.md'), 'utf8')).toContain('Team notes');
    expect((await indexFiles(dir)).sort()).toEqual(['project_deploy.md', 'sub/notes.md']);
    expect(ok.results[3]!.text).toContain('/memories/sub/notes.md');
    expect(ok.results[3]!.text).not.toContain('escape/');
    expect(ok.results[3]!.text).not.toContain('/memories/alias/');
  });
});

describe('engramMemoryTool handlers (typed errors)', () => {
  it('insert, str_replace ambiguity, delete with its index line, and EngramError codes for callers', async () => {
    const dir = memoryDir();
    const tool = engramMemoryTool({ memoryDir: dir });
    await tool.create({ command: 'create', path: '/memories/a.md', file_text: FACT });
    await tool.insert({
      command: 'insert',
      path: '/memories/a.md',
      insert_line: 6,
      insert_text: 'Also fra.',
    });
    expect(await fs.readFile(join(dir, 'a.md'), 'utf8')).toBe(`${FACT}Also fra.\n`);
    const ambiguous = await tool
      .str_replace({ command: 'str_replace', path: '/memories/a.md', old_str: 'a', new_str: 'b' })
      .catch((e: unknown) => e);
    expect(ambiguous).toBeInstanceOf(MemoryToolRefusal);
    expect(ambiguous).toMatchObject({ code: 'AMBIGUOUS_MATCH', retryable: false });
    const missing = await tool.view({ command: 'view', path: '/memories/nope.md' }).catch((e: unknown) => e);
    expect(missing).toMatchObject({ code: 'ENOENT' });
    const badLine = await tool
      .insert({ command: 'insert', path: '/memories/a.md', insert_line: 99, insert_text: 'x' })
      .catch((e: unknown) => e);
    expect(badLine).toMatchObject({ code: 'INVALID_LINE' });
    expect(await indexFiles(dir)).toEqual(['a.md']);
    await tool.delete({ command: 'delete', path: '/memories/a.md' });
    expect(existsSync(join(dir, 'a.md'))).toBe(false);
    expect(await indexFiles(dir)).toEqual([]);
    const root = await tool.delete({ command: 'delete', path: '/memories' }).catch((e: unknown) => e);
    expect(root).toMatchObject({ code: 'NOT_A_FILE' });
    expect(existsSync(dir)).toBe(true);
  });

  it('index edits are refused by default and allowed when the host opts in (the top index only)', async () => {
    const dir = memoryDir();
    const strict = engramMemoryTool({ memoryDir: dir });
    await expect(
      strict.create({ command: 'create', path: '/memories/MEMORY.md', file_text: '# idx\n' }),
    ).rejects.toMatchObject({ code: 'INDEX_NOT_EDITABLE' });
    const open = engramMemoryTool({ memoryDir: dir, allowIndexEdits: true });
    await open.create({ command: 'create', path: '/memories/MEMORY.md', file_text: '# idx\n' });
    expect(await fs.readFile(join(dir, 'MEMORY.md'), 'utf8')).toBe('# idx\n');
    await expect(
      open.create({ command: 'create', path: '/memories/sub/MEMORY.md', file_text: '# idx\n' }),
    ).rejects.toMatchObject({ code: 'INVALID_MEMORY_FILE' });
  });

  it('with consolidate: each change enqueues a dream job for the project on the real queue; a refused call enqueues none', async () => {
    const redis = await startPrivateRedis(closer, { prefix: 'engram-memtool-redis-' });
    const home = mkdtempSync(join(tmpdir(), 'engram-memtool-home-'));
    const repo = mkdtempSync(join(tmpdir(), 'engram-memtool-repo-'));
    await fs.mkdir(join(repo, '.git'));
    const paths = await resolveEngramPaths({ engramHome: home, cwd: repo });
    const memory = new MemoryQueue(
      memoryQueueConfig(home, { url: redis.url, namespace: uniquePrefix('memtool') }),
    );
    closer.defer(() => memory.close());
    const tool = engramMemoryTool({
      memoryDir: paths.memoryDir,
      consolidate: { memory, ref: { sessionId: 'api-session-1', paths } },
    });
    await expect(
      tool.create({ command: 'create', path: '/memories/keys.md', file_text: SECRET }),
    ).rejects.toMatchObject({ code: 'SECRET_IN_MEMORY' });
    expect(tool.lastConsolidation()).toBeUndefined();
    await tool.create({ command: 'create', path: '/memories/project_deploy.md', file_text: FACT });
    const status = tool.lastConsolidation();
    expect(status).toMatchObject({ status: 'queued' });
    const job = await memory.producer.queue('dream').getJob((status as { jobId: string }).jobId);
    expect(job?.data).toMatchObject({
      projectDir: memory.projectRef({ sessionId: 'x', paths }).projectDir,
      force: false,
    });
  }, 30_000);
});
