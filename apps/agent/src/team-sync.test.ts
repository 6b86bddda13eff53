import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { AgentSession } from '@engram/agent-session/agent-session';
import { mainAgentPolicy } from '@engram/agent-session/permissions';
import { TeamMemoryHttpClient } from '@engram/team-memory/client/http-client';
import { pullTeamMemory, pushTeamMemory } from '@engram/team-memory/client/sync';
import { TeamSyncStateFile } from '@engram/team-memory/client/sync-state';
import {
  startTeamMemoryTestServer,
  type TeamMemoryTestServer,
} from '@engram/team-memory/testing/server.test-helpers';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { reply, textReply, toolUse } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { runCommand } from './commands/run.js';
import { teamPull, teamPush, teamStatus } from './commands/team.js';
import { loadAgentConfig } from './config.js';
import { createAgentRuntime } from './runtime.js';

// Team memory across two machines, as people use it: two ENGRAM_HOMEs, two clones of one repository (ssh and
// https remotes), each with its own workers on the run's Redis, one team memory service on embedded
// PostgreSQL. The model is the scripted server; the agents write team memory with the real Write tool.

const FAKE_PAT = ['ghp', 'R8f2kQ9xLm4Tz7Vb1Nc6Hd3Ws5Pa0Ye2Ju8K'].join('_');

let model: ModelServer;
let service: TeamMemoryTestServer;
let apiKey: string;
const closer = new Closer();

beforeAll(async () => {
  model = await startModelServer();
  service = await startTeamMemoryTestServer({ postgresUrl: inject('postgresUrl') });
  apiKey = await service.issueKey('acme');
});
afterEach(async () => {
  await closer.closeAll();
  model.reset();
});
afterAll(async () => {
  await service?.close();
  await model?.close();
});

interface Machine {
  home: string;
  clone: string;
  env: Record<string, string>;
}

async function machine(name: string, remote: string, opts: { workers?: boolean; waitMs?: number } = {}) {
  const root = realpathSync(mkdtempSync(join(tmpdir(), `engram-team-${name}-`)));
  closer.defer(async () => rmSync(root, { recursive: true, force: true }));
  const home = join(root, 'home');
  const clone = join(root, 'widgets');
  execFileSync('git', ['init', '-q', clone]);
  execFileSync('git', ['-C', clone, 'remote', 'add', 'origin', remote]);
  const namespace = uniquePrefix(`team${name}`);
  const env: Record<string, string> = {
    HOME: root,
    ENGRAM_HOME: home,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: model.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ENGRAM_CLEANUP_PERIOD_DAYS: '0',
    ENGRAM_DRAIN_TIMEOUT_MS: '0',
    ENGRAM_TEAM_SYNC_URL: service.url,
    ENGRAM_TEAM_SYNC_KEY: apiKey,
    ENGRAM_TEAM_SYNC_DEBOUNCE_MS: '100',
    // An upper bound only: the session goes on as soon as the pull is done.
    ENGRAM_TEAM_SYNC_WAIT_MS: String(opts.waitMs ?? 15_000),
  };
  if (opts.workers !== false) {
    await startTestWorkerService({
      modelUrl: model.url,
      engramHome: home,
      namespace,
      queues: 'team-sync',
      closer,
      env: { ENGRAM_TEAM_SYNC_URL: service.url, ENGRAM_TEAM_SYNC_KEY: apiKey },
    });
  }
  return { home, clone, env } satisfies Machine;
}

/** Opens a session in the machine's clone (the session-start pull runs here), runs `work`, closes (flush). */
async function session<T>(m: Machine, work: (s: AgentSession) => Promise<T>): Promise<T> {
  const runtime = createAgentRuntime(loadAgentConfig(m.env));
  try {
    const s = await AgentSession.open(runtime, { cwd: m.clone });
    return await work(s);
  } finally {
    await runtime.close();
  }
}

const policy = (s: AgentSession) => mainAgentPolicy({ paths: s.paths, allowedTools: new Set() });

async function storedEntries(repo = 'acme/widgets'): Promise<Record<string, string>> {
  return (await service.store.get('acme', repo))?.entries ?? {};
}

describe('team memory between two machines', () => {
  it('converges: A writes team/x.md and pushes; B pulls it at session start; B edits; A pulls; a delete comes back', async () => {
    const a = await machine('a', 'git@github.com:acme/widgets.git');
    const b = await machine('b', 'https://github.com/Acme/widgets');
    const v1 =
      '---\nname: deploy\ndescription: How deploys run\nmetadata:\n  type: project\n---\nDeploys go through the blue pipeline.\n';
    const v2 = v1.replace('blue', 'green');

    // A: the agent saves a team memory and its index line during a turn; the push follows (debounced).
    await session(a, async (s) => {
      expect(s.teamSync).toMatchObject({
        status: 'pulled',
        repo: 'acme/widgets',
        result: { outcome: 'no-data' },
      });
      model.script(
        reply(
          toolUse('Write', { file_path: join(s.paths.teamDir, 'x.md'), content: v1 }),
          toolUse('Write', {
            file_path: join(s.paths.teamDir, 'MEMORY.md'),
            content: '- [Deploys](x.md) — how deploys run\n',
          }),
        ),
        textReply('Saved it for the team.'),
      );
      const turn = await s.runTurn('Remember for the team: deploys use the blue pipeline.', {
        boundary: ATTENDED,
        canUseTool: policy(s),
      });
      expect(turn.answer).toBe('Saved it for the team.');
    });
    await waitUntil(async () => (await storedEntries())['x.md'] === v1, 'A’s push to reach the service');
    expect(Object.keys(await storedEntries()).sort()).toEqual(['MEMORY.md', 'x.md']);

    // B: the next session pulls before its context is built, so the team index is in it.
    await session(b, async (s) => {
      expect(s.teamSync).toMatchObject({ status: 'pulled', result: { outcome: 'pulled' } });
      expect(s.notices.join('\n')).toContain('Team memory (acme/widgets): pulled 2 files');
      expect(readFileSync(join(s.paths.teamDir, 'x.md'), 'utf8')).toBe(v1);
      expect(s.userContext).toContain('- [Deploys](x.md) — how deploys run');
      model.script(
        reply(toolUse('Read', { file_path: join(s.paths.teamDir, 'x.md') })),
        reply(
          toolUse('Edit', {
            file_path: join(s.paths.teamDir, 'x.md'),
            old_string: 'blue',
            new_string: 'green',
          }),
        ),
        textReply('Updated.'),
      );
      await s.runTurn('Deploys moved to the green pipeline; update the team note.', {
        boundary: ATTENDED,
        canUseTool: policy(s),
      });
    });
    await waitUntil(async () => (await storedEntries())['x.md'] === v2, 'B’s edit to reach the service');

    // A: its next session pulls B's edit.
    const aTeamFile = await session(a, async (s) => {
      expect(s.teamSync).toMatchObject({
        status: 'pulled',
        result: { written: [{ key: 'x.md', change: 'updated' }] },
      });
      return join(s.paths.teamDir, 'x.md');
    });
    expect(readFileSync(aTeamFile, 'utf8')).toBe(v2);

    // Deletions do not propagate: A's local delete is restored by the next pull.
    rmSync(aTeamFile);
    await session(a, async (s) => {
      expect(s.teamSync).toMatchObject({ result: { written: [{ key: 'x.md', change: 'restored' }] } });
    });
    expect(readFileSync(aTeamFile, 'utf8')).toBe(v2);
    expect((await storedEntries())['x.md']).toBe(v2);
  });

  it('refuses a Write that would put a secret into team/ (the reason names the kind of secret, not the value)', async () => {
    const a = await machine('a', 'git@github.com:acme/widgets.git');
    await session(a, async (s) => {
      model.script(
        reply(
          toolUse('Write', { file_path: join(s.paths.teamDir, 'ci.md'), content: `CI token: ${FAKE_PAT}\n` }),
        ),
        textReply('I will not store that.'),
      );
      const events: string[] = [];
      await s.runTurn('Save the CI token for the team.', {
        boundary: ATTENDED,
        canUseTool: policy(s),
        onEvent: (e) => events.push(e.text),
      });
      expect(existsSync(join(s.paths.teamDir, 'ci.md'))).toBe(false);
      const denial = events.find((e) => e.startsWith('Write:'))!;
      expect(denial).toContain('looks like a secret (GitHub');
      expect(denial).toContain('team memory is shared with every collaborator');
      expect(denial).not.toContain(FAKE_PAT);
      // The tool result the model saw says the same.
      const lastRequest = JSON.stringify(model.messageRequests().at(-1)?.body.messages.at(-1));
      expect(lastRequest).toContain('looks like a secret');
    });
    expect(Object.keys(await storedEntries())).not.toContain('ci.md');
  });

  it('never waits for the pull longer than its bound: without workers the session opens on what is on disk', async () => {
    const a = await machine('lonely', 'git@github.com:acme/lonely.git', { workers: false, waitMs: 200 });
    await session(a, async (s) => {
      expect(s.teamSync).toMatchObject({ status: 'pending', repo: 'acme/lonely' });
      expect(s.notices.join('\n')).toContain('pull still running');
    });
  });

  it('is off, with the reason, for a project without a hosted origin remote', async () => {
    const a = await machine('local', '/srv/git/widgets.git', { workers: false });
    await session(a, async (s) => {
      expect(s.teamSync).toEqual({
        status: 'skipped',
        reason:
          'team sync is off for this project: the origin remote is a local path, not a hosted repository',
      });
    });
  });
});

describe('engram team status|pull|push', () => {
  it('reports what would change, what was skipped and why, and does it', async () => {
    const a = await machine('cli', 'git@github.com:acme/cli-repo.git', { workers: false, waitMs: 100 });
    const config = loadAgentConfig(a.env);
    const out: string[] = [];
    const io = { out: (t: string) => out.push(t), err: (t: string) => out.push(t) };
    const teamDir = await session(a, async (s) => s.paths.teamDir);
    mkdirSync(teamDir, { recursive: true });
    writeFileSync(join(teamDir, 'a.md'), 'alpha\n');
    writeFileSync(join(teamDir, 'leak.md'), `token ${FAKE_PAT}\n`);

    expect(await teamStatus(config, { cwd: a.clone, json: false }, io)).toBe(0);
    const status = out.join('\n');
    expect(status).toContain('Team memory for acme/cli-repo');
    expect(status).toContain('to push (1): a.md');
    expect(status).toContain('skipped  leak.md: contains what looks like a secret');
    expect(status).toContain('rule github-pat');
    expect(status).not.toContain(FAKE_PAT);

    out.length = 0;
    expect(await teamPush(config, { cwd: a.clone, json: false }, io)).toBe(0);
    expect(out[0]).toBe('Pushed 1 file to acme/cli-repo in 1 request.');
    expect(await storedEntries('acme/cli-repo')).toEqual({ 'a.md': 'alpha\n' });

    rmSync(join(teamDir, 'a.md'));
    out.length = 0;
    expect(await teamPull(config, { cwd: a.clone, json: true }, io)).toBe(0);
    expect(JSON.parse(out[0]!)).toMatchObject({
      outcome: 'pulled',
      written: [{ key: 'a.md', change: 'restored' }],
    });
  });

  it('status warns of a pull that would overwrite an unpushed edit; pull keeps the edit and says where', async () => {
    const a = await machine('clicf', 'git@github.com:acme/cli-conflict.git', { workers: false, waitMs: 100 });
    const config = loadAgentConfig(a.env);
    const out: string[] = [];
    const io = { out: (t: string) => out.push(t), err: (t: string) => out.push(t) };
    const teamDir = await session(a, async (s) => s.paths.teamDir);
    mkdirSync(teamDir, { recursive: true });
    writeFileSync(join(teamDir, 'deploy.md'), 'blue pipeline\n');
    expect(await teamPush(config, { cwd: a.clone, json: false }, io)).toBe(0);

    // A teammate (the real client, its own directory) pushes a change of the same file.
    const mate = realpathSync(mkdtempSync(join(tmpdir(), 'engram-team-mate-')));
    closer.defer(async () => rmSync(mate, { recursive: true, force: true }));
    const mateTarget = {
      teamDir: join(mate, 'team'),
      repo: 'acme/cli-conflict',
      http: new TeamMemoryHttpClient({ baseUrl: service.url, apiKey, maxRetries: 0 }),
      state: new TeamSyncStateFile(join(mate, 'team-sync.json')),
    };
    await pullTeamMemory(mateTarget);
    writeFileSync(join(mateTarget.teamDir, 'deploy.md'), 'green pipeline\n');
    expect((await pushTeamMemory(mateTarget)).outcome).toBe('pushed');
    writeFileSync(join(teamDir, 'deploy.md'), 'red pipeline (mine, not pushed)\n');

    out.length = 0;
    expect(await teamStatus(config, { cwd: a.clone, json: false }, io)).toBe(0);
    expect(out[1]).toBe('  protocol: team-memory (/api/claude_code/team_memory; no memory store bound)');
    expect(out[3]).toMatch(
      /^ {2}conflict deploy\.md: changed here and on the service; a pull writes the service's version and keeps yours in .*\/team\/\.conflicts\//,
    );
    out.length = 0;
    expect(await teamStatus(config, { cwd: a.clone, json: true }, io)).toBe(0);
    expect(JSON.parse(out[0]!)).toMatchObject({ conflicts: ['deploy.md'], conflictCopies: [] });

    out.length = 0;
    expect(await teamPull(config, { cwd: a.clone, json: false }, io)).toBe(0);
    const line = out.find((l) => l.includes('conflict deploy.md'));
    expect(line).toMatch(/yours is kept in (\/.*\/team\/\.conflicts\/deploy\.conflict-\d{8}T\d{9}Z\.md)$/);
    const copyPath = /yours is kept in (.*)$/.exec(line!)![1]!;
    expect(readFileSync(copyPath, 'utf8')).toBe('red pipeline (mine, not pushed)\n');
    expect(readFileSync(join(teamDir, 'deploy.md'), 'utf8')).toBe('green pipeline\n');
    out.length = 0;
    expect(await teamStatus(config, { cwd: a.clone, json: false }, io)).toBe(0);
    expect(out).toContain(`  conflict copy ${copyPath} (an earlier pull kept your version here)`);
    expect(out.join('\n')).toContain('to push (0)');
  });

  it('says how to configure it when it is not', async () => {
    const a = await machine('nocfg', 'git@github.com:acme/x.git', { workers: false });
    const { ENGRAM_TEAM_SYNC_KEY: _k, ...env } = a.env;
    await expect(
      teamStatus(loadAgentConfig(env), { cwd: a.clone, json: false }, { out() {}, err() {} }),
    ).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('set ENGRAM_TEAM_SYNC_URL (the service) and ENGRAM_TEAM_SYNC_KEY'),
    });
  });
});

// `engram run` is a one-shot process: its shutdown flush must leave the push queued for the workers.
describe('engram run', () => {
  it('flushes team memory at exit', async () => {
    const a = await machine('run', 'git@github.com:acme/run-repo.git');
    const config = loadAgentConfig({ ...a.env, ENGRAM_TEAM_SYNC_DEBOUNCE_MS: '60000' });
    const teamDir = await session(a, async (s) => s.paths.teamDir);
    model.script(
      reply(toolUse('Write', { file_path: join(teamDir, 'run.md'), content: 'from run\n' })),
      textReply('Done.'),
    );
    const code = await runCommand(
      config,
      { prompt: 'Note this for the team please.', cwd: a.clone, outputFormat: 'text' },
      { out() {}, err() {} },
    );
    expect(code).toBe(0);
    await waitUntil(
      async () => (await storedEntries('acme/run-repo'))['run.md'] === 'from run\n',
      'the push to land',
    );
  });
});
