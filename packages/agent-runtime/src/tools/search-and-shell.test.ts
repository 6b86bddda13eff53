import { execFileSync } from 'node:child_process';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import { ATTENDED } from '../sandbox/boundary.js';
import { bashTool, isSecretEnvName, scrubEnvironment } from './bash.js';
import { globTool, MAX_GLOB_RESULTS } from './glob.js';
import { grepTool, runGrep } from './grep.js';
import { defaultTools, toolDefinitions } from './registry.js';
import { ReadFileState, type ToolContext } from './tool.js';

let dir: string;
let cleanup: () => Promise<void>;
let ctx: ToolContext;
beforeEach(async () => {
  ({ dir, cleanup } = await makeTempDir());
  ctx = { cwd: dir, readFileState: new ReadFileState(), toolUseId: 'toolu_test', boundary: ATTENDED };
});
afterEach(() => cleanup());

async function put(rel: string, content: string, mtimeSecondsAgo = 0) {
  const path = join(dir, rel);
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, content);
  const t = new Date(Date.now() - mtimeSecondsAgo * 1000);
  await utimes(path, t, t);
  return path;
}

const grep = (input: Record<string, unknown>) => grepTool.call(grepTool.inputSchema.parse(input), ctx);
const glob = (input: Record<string, unknown>) => globTool.call(globTool.inputSchema.parse(input), ctx);
const bash = (input: Record<string, unknown>) => bashTool.call(bashTool.inputSchema.parse(input), ctx);

describe('Bash', () => {
  it('runs in the working directory and returns stdout and stderr', async () => {
    const out = await bash({ command: 'pwd; echo oops >&2' });
    expect(out.content).toBe(`${dir}\noops`);
    expect(out.isError).toBeUndefined();
  });

  it('reports a non-zero exit as an error with the exit code', async () => {
    const out = await bash({ command: 'echo partial; exit 3' });
    expect(out).toEqual({ content: 'partial\nExit code 3', isError: true });
  });

  it('kills a command that outlives its timeout', async () => {
    const out = await bash({ command: 'echo started; sleep 5', timeout: 200 });
    expect(out.isError).toBe(true);
    expect(out.content).toBe('started\nCommand timed out after 0.2s and was killed.');
  });

  it('does not pass credentials to the command', async () => {
    ctx.env = {
      PATH: process.env.PATH,
      ANTHROPIC_API_KEY: 'sk-ant-secret',
      GITHUB_TOKEN: 'ghp_secret',
      AWS_SECRET_ACCESS_KEY: 'aws-secret',
      REDIS_URL: 'redis://:hunter2@redis:6379',
      PLAIN_URL: 'https://example.com/x',
      HARMLESS: 'visible',
    };
    const out = await bash({ command: 'env | sort' });
    expect(out.content).toContain('HARMLESS=visible');
    expect(out.content).toContain('PLAIN_URL=https://example.com/x');
    expect(out.content).not.toMatch(/secret|hunter2|ghp_/);
  });

  it('exposes read-only classification of its input', () => {
    expect(bashTool.isReadOnly({ command: 'git status' })).toBe(true);
    expect(bashTool.isReadOnly({ command: 'git commit -m x' })).toBe(false);
    expect(bashTool.isConcurrencySafe({ command: 'ls' })).toBe(true);
    expect(bashTool.isConcurrencySafe({ command: 'touch x' })).toBe(false);
  });
});

describe('scrubEnvironment', () => {
  it('drops secret-looking names and URLs with passwords, keeps the rest', () => {
    expect(
      scrubEnvironment({
        ANTHROPIC_API_KEY: 'a',
        ANTHROPIC_AUTH_TOKEN: 'b',
        NPM_TOKEN: 'c',
        DB_PASSWORD: 'd',
        STRIPE_SECRET: 'e',
        SSH_PRIVATE_KEY: 'f',
        DATABASE_URL: 'postgres://user:pw@db/app',
        ENGRAM_QUEUE_URL: 'postgres://u:p@h/q',
        HOME: '/home/x',
        KEYBOARD_LAYOUT: 'us',
        MONKEY: 'ok',
      }),
    ).toEqual({ HOME: '/home/x', KEYBOARD_LAYOUT: 'us', MONKEY: 'ok' });
    expect(isSecretEnvName('aws_session_token')).toBe(true);
    expect(isSecretEnvName('PWD')).toBe(false);
  });
});

describe('Grep', () => {
  beforeEach(async () => {
    await put('src/a.ts', 'export const alpha = 1;\n// TODO: beta\nconst gamma = 3;\n', 30);
    await put('src/b.js', 'todo: lowercase\n', 10);
    await put('docs/c.md', 'nothing here\n', 20);
    await put('node_modules/dep/index.js', 'TODO in a dependency\n');
    await writeFile(join(dir, 'bin.dat'), Buffer.from('TODO\0binary'));
  });

  it('lists matching files newest first, skipping dependencies and binaries', async () => {
    const out = await grep({ pattern: 'todo', '-i': true });
    expect(out.content).toBe('Found 2 files\nsrc/b.js\nsrc/a.ts');
  });

  it('shows matching lines with numbers and context in content mode', async () => {
    const out = await grep({ pattern: 'TODO', output_mode: 'content', '-C': 1, glob: '*.ts' });
    expect(out.content).toBe(
      'src/a.ts-1-export const alpha = 1;\nsrc/a.ts:2:// TODO: beta\nsrc/a.ts-3-const gamma = 3;',
    );
  });

  it('counts matches per file and honours type and head_limit', async () => {
    const counted = await grep({ pattern: 'a', output_mode: 'count', type: 'ts' });
    expect(counted.content).toBe('src/a.ts:3\n\nFound 3 total occurrences across 1 file.');
    const limited = await grep({ pattern: '.', output_mode: 'content', head_limit: 2, path: 'src/a.ts' });
    expect(limited.content).toBe(
      '1:export const alpha = 1;\n2:// TODO: beta\n\n[Showing first 2 of 3 lines]',
    );
  });

  it('matches across lines in multiline mode', async () => {
    const out = await grep({ pattern: 'alpha.*\\n.*TODO', multiline: true, output_mode: 'content' });
    expect(out.content).toBe('src/a.ts:1:export const alpha = 1;\nsrc/a.ts:2:// TODO: beta');
  });

  it('reports bad patterns and no matches plainly', async () => {
    await expect(grep({ pattern: '(' })).rejects.toMatchObject({ code: 'INVALID_PATTERN' });
    expect((await grep({ pattern: 'zzz_nope' })).content).toBe('No files found');
  });

  it('honours .gitignore inside a repository and .ignore anywhere', async () => {
    await mkdir(join(dir, '.git'));
    await put('.gitignore', 'build/\n');
    await put('build/out.js', 'TODO generated\n');
    await put('vendor/.ignore', 'skipped.md\n');
    await put('vendor/skipped.md', 'TODO vendored\n');
    await put('vendor/kept.md', 'TODO kept\n', 40);
    const out = await grep({ pattern: 'TODO' });
    expect(out.content).toBe('Found 2 files\nsrc/a.ts\nvendor/kept.md');
  });

  it('takes a pattern that starts with a dash as a pattern, never as an rg option', async () => {
    await put('flags.txt', 'run with --pre=./evil\n');
    const out = await grep({ pattern: '--pre=./evil', output_mode: 'content' });
    expect(out.content).toBe('flags.txt:1:run with --pre=./evil');
  });

  it('runs a pattern that backtracks catastrophically in JavaScript in linear time', async () => {
    await put('long.txt', `${'a'.repeat(50_000)}!\n`);
    const out = await grep({ pattern: '^(a+)+$', path: 'long.txt' });
    expect(out.content).toBe('No files found');
  });

  it('refuses a FIFO as the search root instead of blocking on it', async () => {
    const fifo = join(dir, 'never-written');
    execFileSync('mkfifo', [fifo]);
    await expect(grep({ pattern: 'x', path: fifo })).rejects.toMatchObject({ code: 'NOT_REGULAR' });
  });

  it('stops a search that outlives its time bound and says the result is incomplete', async () => {
    // Unicode word boundaries on non-ASCII text leave rg's fast engines: about 1 s of scanning for 3 MB.
    await put('big.txt', `é${'ab cd '.repeat(16)}\n`.repeat(30_000));
    const out = await runGrep(
      grepTool.inputSchema.parse({ pattern: '\\b(\\w+\\s+){3}\\w{30,}\\b', path: 'big.txt' }),
      ctx,
      { timeoutMs: 200 },
    );
    expect(out.content).toMatch(/^No files found\n\n\[Search stopped after 200 ms: results are incomplete/);
  });

  it('caps the output it reads from rg and says the result is incomplete', async () => {
    await put('many.txt', 'TODO line\n'.repeat(5_000));
    const out = await runGrep(
      grepTool.inputSchema.parse({ pattern: 'TODO', output_mode: 'content', path: 'many.txt' }),
      ctx,
      { maxOutputBytes: 4_096 },
    );
    expect(out.content).toMatch(/^1:TODO line\n2:TODO line\n/);
    expect(out.content).toMatch(/\[Search output exceeded its cap: results are incomplete/);
    expect(out.content.split('\n').filter((l) => l.endsWith(':TODO line')).length).toBeLessThan(5_000);
  });

  it('fails with a typed error that says how to install ripgrep when the configured rg is missing', async () => {
    const input = grepTool.inputSchema.parse({ pattern: 'TODO' });
    await expect(
      runGrep(input, ctx, { env: { ENGRAM_RIPGREP_PATH: join(dir, 'no-such-rg') } }),
    ).rejects.toMatchObject({
      code: 'RIPGREP_NOT_FOUND',
      message: expect.stringMatching(/ENGRAM_RIPGREP_PATH/),
    });
  });
});

describe('Glob', () => {
  it('matches a pattern newest first with absolute paths', async () => {
    const old = await put('src/old.ts', '', 100);
    const recent = await put('src/deep/new.ts', '', 1);
    await put('src/skip.js', '');
    const out = await glob({ pattern: '**/*.ts' });
    expect(out.content).toBe(`${recent}\n${old}`);
    expect((await glob({ pattern: 'src/*.ts' })).content).toBe(old);
    expect((await glob({ pattern: '*.md' })).content).toBe('No files found');
  });

  it(`caps results at ${MAX_GLOB_RESULTS}`, async () => {
    await Promise.all(Array.from({ length: MAX_GLOB_RESULTS + 5 }, (_, i) => put(`f/${i}.txt`, '')));
    const out = String((await glob({ pattern: '**/*.txt' })).content);
    expect(out.split('\n').filter((l) => l.startsWith('/'))).toHaveLength(MAX_GLOB_RESULTS);
    expect(out).toMatch(/Results are truncated: showing 100 of 105/);
  });
});

describe('defaultTools', () => {
  it('offers the six tools in a fixed order with byte-stable definitions', () => {
    const defs = toolDefinitions(defaultTools());
    expect(defs.map((d) => d.name)).toEqual(['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write']);
    expect(JSON.stringify(toolDefinitions(defaultTools()))).toBe(JSON.stringify(defs));
    const edit = defs.find((d) => d.name === 'Edit')!;
    expect(edit.input_schema).not.toHaveProperty('$schema');
    expect(edit.input_schema).toMatchObject({
      type: 'object',
      required: ['file_path', 'old_string', 'new_string'],
      properties: { replace_all: { type: 'boolean', default: false } },
    });
    const grepDef = defs.find((d) => d.name === 'Grep')!;
    expect(Object.keys(grepDef.input_schema.properties as object)).toEqual(
      expect.arrayContaining(['pattern', 'path', 'glob', 'output_mode', '-i', '-n', 'head_limit']),
    );
  });
});
