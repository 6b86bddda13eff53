import { existsSync, promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Options, query, type SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { jsonReply, reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import {
  isExtractionRequest,
  scriptExtractionFork,
} from '@engram/worker-service/testing/foreground.test-helpers';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { describe, expect, it } from 'vitest';
import { engramHooks } from './hooks.js';
import { engramMcpServer } from './mcp-server.js';

// The Agent SDK's own `query()`, which spawns the Claude Code 2.1.328 binary it ships
// (@anthropic-ai/claude-agent-sdk-linux-x64), offline against the scripted model (ANTHROPIC_BASE_URL), with
// Engram's hook callbacks and in-process MCP server: a turn states a fact → the Stop callback enqueues
// extraction on a real Redis → an in-process worker service extracts from Claude Code's transcript into
// Claude Code's memory directory → the next query() gets the memory as UserPromptSubmit context, and the
// model's MCP tool call returns it.

const scripted = useModelServer();
const { closer } = scripted;

const BODY = 'Production deploys go to region ams-7 (quoted from the deploy runbook).';
const FACT = `---\nname: Deploy region\ndescription: Deploys go to region ams-7\ntype: project\n---\n${BODY}\n`;

const isSelector = (r: RecordedRequest) =>
  (r.body as { output_config?: { format?: { type?: string } } }).output_config?.format?.type ===
  'json_schema';
const isMain = (r: RecordedRequest) => !isExtractionRequest(r.body) && !isSelector(r);

function bodyText(r: RecordedRequest): string {
  return JSON.stringify(r.body.messages);
}

function scriptWorkers(runs: { extract: number; select: number }) {
  scriptExtractionFork(scripted.server, () => {
    runs.extract++;
    return { file: 'project_deploy.md', content: FACT };
  });
  scripted.server.route(
    'selector',
    isSelector,
    (r) => {
      runs.select++;
      return jsonReply({
        selected_memories: bodyText(r).includes('project_deploy.md') ? ['project_deploy.md'] : [],
      });
    },
    { sticky: true },
  );
}

/** Claude Code's main requests: state the fact; later ask, call the MCP search tool, answer from its result. */
function scriptMain() {
  scripted.server.route(
    'main',
    isMain,
    (r): ScriptStep => {
      const messages = bodyText(r);
      if (messages.includes('Remember that we deploy')) return textReply('Noted: we deploy to region ams-7.');
      if (messages.includes('tool_result') && messages.includes('mcp__engram__search_memories')) {
        return textReply('We deploy to region ams-7.');
      }
      return reply(
        text('Let me check memory.'),
        toolUse('mcp__engram__search_memories', { query: 'deploy region' }),
      );
    },
    { sticky: true },
  );
}

async function run(prompt: string, options: Options): Promise<SDKMessage[]> {
  const out: SDKMessage[] = [];
  for await (const m of query({ prompt, options })) out.push(m);
  return out;
}

describe('Agent SDK query() with engramHooks and engramMcpServer', () => {
  it('a stated fact is extracted through the Stop callback, recalled as context and found by the MCP tool', async () => {
    const runs = { extract: 0, select: 0 };
    scriptWorkers(runs);
    scriptMain();
    const redis = await startPrivateRedis(closer, { prefix: 'engram-sdk-redis-' });
    // Claude Code's config directory is Engram's home: the workers read its transcripts and write its memory.
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-sdk-claude-'));
    const repo = mkdtempSync(join(tmpdir(), 'engram-sdk-repo-'));
    await fs.mkdir(join(repo, '.git'));
    const namespace = uniquePrefix('sdk');
    await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: claudeHome,
      queues: 'extract,recall',
      closer,
      backendEnv: { REDIS_URL: redis.url },
      namespace,
    });
    const notes: string[] = [];
    const engram = engramHooks({
      engramHome: claudeHome,
      queue: { url: redis.url, namespace },
      onNote: (event, note) => notes.push(`${event}: ${note}`),
    });
    closer.defer(() => engram.close());
    const options = async (): Promise<Options> => ({
      cwd: repo,
      env: {
        PATH: process.env.PATH,
        HOME: claudeHome,
        CLAUDE_CONFIG_DIR: claudeHome,
        ANTHROPIC_BASE_URL: scripted.server.url,
        ANTHROPIC_API_KEY: 'test',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      },
      settingSources: [],
      hooks: engram.hooks,
      mcpServers: { engram: await engramMcpServer({ engramHome: claudeHome, cwd: repo }) },
      allowedTools: ['mcp__engram__search_memories'],
    });

    const first = await run('Remember that we deploy to region ams-7.', await options());
    expect(first.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    const paths = await resolveEngramPaths({ engramHome: claudeHome, cwd: repo });
    const memoryFile = join(paths.memoryDir, 'project_deploy.md');
    await waitUntil(async () => existsSync(memoryFile), 'the worker extracted the fact', {
      timeoutMs: 60_000,
    }).catch((error: Error) => {
      const routes = scripted.server.requests.map((r) => r.route ?? 'unrouted');
      throw new Error(`${error.message}; hook notes: ${JSON.stringify(notes)}; model requests: ${routes}`);
    });
    expect(notes.find((n) => n.startsWith('Stop:'))).toMatch(/memory extraction queued/);
    expect(await fs.readFile(memoryFile, 'utf8')).toContain(BODY);
    await waitUntil(
      async () =>
        parseIndexEntries(await fs.readFile(paths.memoryIndexPath, 'utf8').catch(() => '')).some(
          (e) => e.file === 'project_deploy.md',
        ),
      'index pointer',
      { timeoutMs: 10_000 },
    );
    // The extraction forked from Claude Code's own transcript of the first session.
    const firstSession = (first[0] as { session_id: string }).session_id;
    expect(existsSync(paths.transcriptPath(firstSession))).toBe(true);
    expect(runs.extract).toBe(1);

    const mainBefore = scripted.server.messageRequests('main').length;
    const second = await run('Which region do we deploy to?', await options());
    expect(second.at(-1)).toMatchObject({
      type: 'result',
      subtype: 'success',
      result: 'We deploy to region ams-7.',
    });
    const secondMain = scripted.server.messageRequests('main').slice(mainBefore);
    // The UserPromptSubmit callback answered with the recalled memory's body (MEMORY.md alone has no body).
    expect(runs.select).toBeGreaterThanOrEqual(1);
    expect(bodyText(secondMain[0]!)).toContain(BODY);
    expect(bodyText(secondMain[0]!)).toContain('Relevant memories from');
    // The model's MCP tool call reached Engram's server in this process and returned the memory.
    const toolAnswer = secondMain.find((r) => bodyText(r).includes('tool_result'));
    expect(toolAnswer && bodyText(toolAnswer)).toContain('project_deploy.md');
    expect(toolAnswer && bodyText(toolAnswer)).toContain('Deploys go to region ams-7');
  }, 150_000);
});
