import { execFile } from 'node:child_process';
import { chmodSync, existsSync, promises as fs, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  createAssistantEntry,
  createAttachmentEntry,
  createUserEntry,
} from '@engram/agent-runtime/transcript/entry';
import { outboxPath } from '@engram/memory-core/extraction/session-record';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { formatMemoryNotice, memoryUpdateAttachment } from '@engram/memory-core/prompts/memory-notice';
import { relevantMemoriesAttachment } from '@engram/memory-core/recall/prefetch';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { claudeCodeEnv, ensureClaudeCode } from '@engram/testkit/claude-code';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { jsonReply, reply, type ScriptStep, textReply, toolUse } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import { scriptExtractionFork } from '@engram/worker-service/testing/foreground.test-helpers';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { describe, expect, it } from 'vitest';

// The real Claude Code 2.1.328 (installed from npm into a cache directory by testkit, run offline against the
// scripted model) with Engram's plugin installed by Claude Code's own plugin commands: hooks and the MCP server
// run `engram` from PATH (a shim onto this checkout's sources), Claude Code's config directory is the workers'
// ENGRAM_HOME. Session 1 states a fact -> Stop hook -> a real worker on a real Redis extracts from Claude Code's
// own transcript into Claude Code's memory directory -> session 2 has it in its MEMORY.md and as
// UserPromptSubmit context, and the model's MCP call reaches Engram's search. With Redis down a turn still
// succeeds, the Stop hook parks the work in the outbox, and once the stack is back the sweep drains it.

const install = await ensureClaudeCode();
if (!install.ok) console.error(`\n*** claude-code-e2e: ${install.skipReason} ***\n`);

const scripted = useModelServer();
const { closer } = scripted;

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const AGENT_SRC = fileURLToPath(new URL('./', import.meta.url));
const SMALL_MODEL = 'small-test-model';
const DEPLOY =
  '---\nname: deploy-region\ndescription: Deploys go to region ams\nmetadata:\n  type: project\n---\nWe deploy to region ams.\n';
const STAGING =
  '---\nname: staging-region\ndescription: Staging runs in region fra\nmetadata:\n  type: project\n---\nStaging is in fra.\n';

/** A plugin's MCP tools are named mcp__plugin_<plugin>_<server>__<tool> by Claude Code. */
const SEARCH_TOOL = 'mcp__plugin_engram_engram__search_memories';
const isClaudeCode = (r: RecordedRequest) =>
  JSON.stringify(r.body.system ?? '').includes('cc_version=2.1.328');
const bodyText = (r: RecordedRequest) => JSON.stringify(r.body.messages);

function run(bin: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(bin, args, { ...opts, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end();
  });
}

/** `engram` on PATH: this checkout's CLI from source, `hook` through the lean entry as bin/engram.js routes it. */
function engramShim(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const tsx = pathToFileURL(join(REPO_ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
  const node = `"${process.execPath}" --conditions=source --import ${tsx}`;
  writeFileSync(
    join(dir, 'engram'),
    `#!/bin/sh\nif [ "$1" = hook ]; then shift; exec ${node} "${AGENT_SRC}bin/engram-hook.ts" "$@"; fi\nexec ${node} "${AGENT_SRC}bin/engram.ts" "$@"\n`,
  );
  chmodSync(join(dir, 'engram'), 0o755);
  return dir;
}

/** The main loop's replies: note a fact; answer a question via ToolSearch -> Engram's MCP search -> answer. */
function scriptClaudeCode(): void {
  scripted.server.route(
    'claude-code',
    isClaudeCode,
    (r): ScriptStep => {
      const all = bodyText(r);
      if (all.includes('Remember that we deploy to region ams')) return textReply('Noted: region ams.');
      if (all.includes('staging is in region fra')) return textReply('Noted: staging in fra.');
      if (all.includes('Which region do we deploy to')) {
        // MCP tools are deferred: load the schema with ToolSearch once the server has connected (its tools
        // are listed to the model then), call it, answer from its result.
        if (all.includes(`"name":"${SEARCH_TOOL}"`)) return textReply('We deploy to region ams.');
        if ((r.body.tools ?? []).some((t) => t.name === SEARCH_TOOL))
          return reply(toolUse(SEARCH_TOOL, { query: 'deploy region', limit: 5 }));
        return {
          ...reply(toolUse('ToolSearch', { query: `select:${SEARCH_TOOL}`, max_results: 1 })),
          latencyMs: 200,
        };
      }
      if (all.includes('What did we say before')) return textReply('We said region ams.');
      return textReply('OK.');
    },
    { sticky: true },
  );
}

function scriptWorkers(forks: string[]): void {
  scripted.server.route(
    'selector',
    (r) => r.body.model === SMALL_MODEL,
    (r) =>
      jsonReply({
        selected_memories: JSON.stringify(r.body.messages).includes('project_deploy.md')
          ? ['project_deploy.md']
          : [],
      }),
    { sticky: true },
  );
  scriptExtractionFork(scripted.server, (_memoryDir, r) => {
    const all = bodyText(r);
    const staging = all.includes('staging is in region fra');
    const deploy = all.includes('Remember that we deploy to region ams');
    forks.push(staging ? 'staging' : deploy ? 'deploy' : 'other');
    if (staging) return { file: 'project_staging.md', content: STAGING };
    if (deploy) return { file: 'project_deploy.md', content: DEPLOY };
    return undefined;
  });
}

/** The text of the search tool's result in a request to the model, if it carries one. */
function searchResultOf(r: RecordedRequest): string | undefined {
  type Block = { type: string; id?: string; name?: string; tool_use_id?: string; content?: unknown };
  const blocks = r.body.messages.flatMap((m) => (Array.isArray(m.content) ? (m.content as Block[]) : []));
  const call = blocks.find((b) => b.type === 'tool_use' && b.name === SEARCH_TOOL);
  const result = call && blocks.find((b) => b.type === 'tool_result' && b.tool_use_id === call.id);
  if (!result) return undefined;
  if (typeof result.content === 'string') return result.content;
  return (result.content as Block[]).map((b) => (b as { text?: string }).text ?? '').join('\n');
}

/** waitUntil, naming what the background hooks logged when it times out. */
async function waitFor(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs: number,
  log: () => Promise<string>,
) {
  try {
    await waitUntil(check, what, { timeoutMs, ignoreErrors: true, intervalMs: 100 });
  } catch (error) {
    throw new Error(`${(error as Error).message}\nhook log:\n${await log()}`);
  }
}

async function indexFiles(memoryIndexPath: string): Promise<string[]> {
  return parseIndexEntries(await fs.readFile(memoryIndexPath, 'utf8').catch(() => '')).map((e) => e.file);
}

async function claudeCodeSetup() {
  if (!install.ok) throw new Error('unreachable');
  const base = mkdtempSync(join(tmpdir(), 'engram-cc-e2e-'));
  const home = join(base, 'home');
  const configDir = join(base, 'claude');
  const repo = join(base, 'repo');
  mkdirSync(home, { recursive: true });
  mkdirSync(configDir, { recursive: true });
  mkdirSync(join(repo, '.git'), { recursive: true });
  const bin = engramShim(join(base, 'bin'));
  const redis = await startPrivateRedis(closer, { prefix: 'engram-cc-e2e-', persist: true });
  const namespace = uniquePrefix('cce2e');
  const env = claudeCodeEnv({
    baseUrl: scripted.server.url,
    configDir,
    home,
    path: `${bin}:${process.env.PATH ?? ''}`,
    extra: {
      REDIS_URL: redis.url,
      ENGRAM_NAMESPACE: namespace,
      ENGRAM_ENQUEUE_TIMEOUT_MS: '1500',
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
      ENGRAM_HOOK_LOG: join(base, 'hooks.log'),
    },
  });
  const claude = (args: string[]) => run(install.bin, args, { cwd: repo, env });
  const paths = await resolveEngramPaths({ engramHome: configDir, cwd: repo });
  return { base, configDir, repo, redis, namespace, env, claude, paths };
}

describe.skipIf(!install.ok)('Engram with the real Claude Code 2.1.328', () => {
  it('plugin: a fact from session 1 is extracted by a worker, is in session 2 (MEMORY.md, hook context, MCP search); a turn with the stack down succeeds and its work is recovered', async () => {
    const forks: string[] = [];
    scriptClaudeCode();
    scriptWorkers(forks);
    const s = await claudeCodeSetup();
    const hookLog = () => fs.readFile(join(s.base, 'hooks.log'), 'utf8').catch(() => '(no hook log)');

    // The plugin, installed with Claude Code's own commands from this checkout's marketplace.
    const added = await s.claude(['plugin', 'marketplace', 'add', join(REPO_ROOT, 'plugins')]);
    expect(added.code, added.stderr + added.stdout).toBe(0);
    const installed = await s.claude(['plugin', 'install', 'engram@engram']);
    expect(installed.code, installed.stderr + installed.stdout).toBe(0);

    const workers = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: s.configDir,
      queues: 'extract,recall',
      backendEnv: { REDIS_URL: s.redis.url },
      namespace: s.namespace,
      env: { ENGRAM_SMALL_MODEL: SMALL_MODEL },
    });

    // Session 1 states a fact; its Stop hook hands the extraction to a worker.
    const one = await s.claude(['-p', 'Remember that we deploy to region ams.']);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toContain('Noted: region ams.');
    await waitFor(
      async () => (await indexFiles(s.paths.memoryIndexPath)).includes('project_deploy.md'),
      "the worker saved the fact into Claude Code's memory directory",
      45_000,
      hookLog,
    );
    expect(s.paths.memoryDir.startsWith(join(s.configDir, 'projects'))).toBe(true);
    expect(await fs.readFile(join(s.paths.memoryDir, 'project_deploy.md'), 'utf8')).toContain('region ams');

    // Session 2: the memory is in MEMORY.md, in hook context, and behind Engram's MCP search.
    const before = scripted.server.requests.length;
    // -p asks no one: the search tool is allowed as a user would allow it (search only reads).
    const two = await s.claude([
      '-p',
      'Which region do we deploy to?',
      '--allowedTools',
      SEARCH_TOOL,
      '--max-turns',
      '30',
    ]);
    expect(two.code, two.stderr).toBe(0);
    expect(two.stdout).toContain('We deploy to region ams.');
    const main = scripted.server.requests.slice(before).filter(isClaudeCode);
    const first = bodyText(main[0]!);
    expect(first).toContain('MEMORY.md');
    expect(first).toContain('project_deploy.md');
    expect(first).toContain('UserPromptSubmit hook additional context');
    expect(first).toContain('We deploy to region ams.');
    const searched = main.map(searchResultOf).find((x) => x !== undefined);
    expect(searched, 'the MCP tool result reached the model').toBeDefined();
    expect(searched).toContain('project_deploy.md');
    expect(searched).toMatch(/"via":\s*"selector"/);

    // The stack down: the turn is unaffected, the Stop hook parks the extraction in the session's outbox.
    await workers.stop('test');
    await s.redis.stop();
    const three = await s.claude(['-p', 'Also note that staging is in region fra.']);
    expect(three.code, three.stderr).toBe(0);
    expect(three.stdout).toContain('Noted: staging in fra.');
    const sessions = await fs.readdir(s.paths.transcriptDir);
    const outboxes = () =>
      sessions
        .filter((f) => f.endsWith('.jsonl'))
        .map((f) => outboxPath(s.paths.sessionDir(f.replace(/\.jsonl$/, ''))))
        .filter((p) => existsSync(p));
    await waitFor(
      async () => {
        sessions.splice(0, sessions.length, ...(await fs.readdir(s.paths.transcriptDir)));
        return outboxes().length > 0;
      },
      'the Stop hook parked the extraction in the outbox',
      30_000,
      hookLog,
    );

    // The stack back: the sweep hands the outbox to the queue and a worker extracts the parked turn.
    await s.redis.start();
    await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: s.configDir,
      queues: 'extract,recall,reconcile',
      closer,
      backendEnv: { REDIS_URL: s.redis.url },
      namespace: s.namespace,
      env: {
        ENGRAM_SMALL_MODEL: SMALL_MODEL,
        ENGRAM_RECONCILE_INTERVAL_MS: '500',
        ENGRAM_RECONCILE_QUIET_MS: '200',
      },
    });
    await waitFor(
      async () => (await indexFiles(s.paths.memoryIndexPath)).includes('project_staging.md'),
      'the parked extraction recovered',
      45_000,
      hookLog,
    );
    // Each stated fact was extracted once (session 1 was not re-extracted by the sweep).
    expect(forks.filter((f) => f === 'deploy')).toHaveLength(1);
    expect(forks.filter((f) => f === 'staging')).toHaveLength(1);
  }, 120_000);

  it("a session Engram wrote, with recalled memories and a memory-update notice in Claude Code's attachment shapes, keeps them on `claude -p --resume`", async () => {
    scriptClaudeCode();
    const s = await claudeCodeSetup();
    await s.redis.stop();
    const sessionId = crypto.randomUUID();
    await fs.mkdir(s.paths.transcriptDir, { recursive: true });
    const stampOf = (parentUuid: string | null) => ({ sessionId, cwd: s.repo, parentUuid });
    const recalled = relevantMemoriesAttachment(
      [
        {
          path: 'project_deploy.md',
          header: 'Memory (saved today): project_deploy.md',
          content: 'Deploys go through the blue-green script.',
          truncated: false,
          mtimeMs: Date.now(),
        },
      ],
      s.paths.memoryDir,
    );
    const changes = [{ path: 'feedback_tests.md', action: 'created' as const }];
    const notice = formatMemoryNotice(changes)!;
    const u1 = createUserEntry(stampOf(null), 'How do we deploy?');
    const a1 = createAttachmentEntry(stampOf(u1.uuid), recalled.content, recalled.extra);
    const r1 = createAssistantEntry(stampOf(a1.uuid), {
      content: [{ type: 'text', text: 'With the blue-green script.' }],
      stop_reason: 'end_turn',
    });
    const a2 = createAttachmentEntry(stampOf(r1.uuid), notice, {
      attachmentKind: 'memory_notice',
      attachment: memoryUpdateAttachment(changes, s.paths.memoryDir),
    });
    const u2 = createUserEntry(stampOf(a2.uuid), 'Thanks.');
    const r2 = createAssistantEntry(stampOf(u2.uuid), {
      content: [{ type: 'text', text: 'You are welcome.' }],
      stop_reason: 'end_turn',
    });
    await fs.writeFile(
      s.paths.transcriptPath(sessionId),
      [u1, a1, r1, a2, u2, r2].map((e) => `${JSON.stringify(e)}\n`).join(''),
    );

    const before = scripted.server.requests.length;
    const resumed = await s.claude(['-p', '--resume', sessionId, 'What did we say before?']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain('We said region ams.');
    const request = scripted.server.requests.slice(before).find(isClaudeCode)!;
    const sent = bodyText(request);
    expect(sent).toContain('How do we deploy?');
    expect(sent).toContain('Deploys go through the blue-green script.');
    expect(sent).toContain('Memory (saved today): project_deploy.md');
    expect(sent).toContain("Engram's background memory work changed these memory files");
  }, 60_000);
});
