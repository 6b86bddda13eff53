import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import { engramPathsFromDirNames, resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { createQueueEngine } from '@engram/queue/engine';
import { JobProducer } from '@engram/queue/producer';
import { TenantStore } from '@engram/tenants/tenant-store';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, type RecordedRequest, startModelServer } from '@engram/testkit/model-server';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob, waitUntil } from '@engram/testkit/wait';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { isFork, lastUser, textOf } from '../cli.test-helpers.js';
import { type RunningServer, startServer } from '../commands/serve.js';
import { loadAgentConfig } from '../config.js';
import { ROUTES } from './openapi.js';

// The hosted service end to end: real HTTP on loopback, real Redis, the scripted model, the real workers.

const SMALL_MODEL = 'small-test-model';
const MEMORY =
  '---\nname: Deploys\ndescription: Deploys go through the blue/green script\ntype: project\n---\nUse deploy.sh.\n';

let model: ModelServer;
let base: string;
let engramHome: string;
let namespace: string;
const closer = new Closer();
let main: (r: RecordedRequest) => ScriptStep;
const servers: RunningServer[] = [];

function env(extra: Record<string, string> = {}): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: model.url,
    ENGRAM_SMALL_MODEL: SMALL_MODEL,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_SESSION_LEASE_TTL_MS: '2000',
    ENGRAM_SERVE_MAX_BODY_BYTES: '65536',
    // The run's PostgreSQL for team memory and memory stores (without it each replica would start an embedded one).
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `hosted_${process.pid}`,
    ...extra,
  };
}

async function replica(extra: Record<string, string> = {}): Promise<RunningServer> {
  const e = env(extra);
  const running = await startServer(loadAgentConfig(e), { port: 0, host: '127.0.0.1' }, e);
  servers.push(running);
  return running;
}

interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
  body: any;
}

async function call(
  url: string,
  path: string,
  opts: {
    method?: string;
    key?: string;
    body?: unknown;
    raw?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method: opts.method ?? (opts.body !== undefined || opts.raw !== undefined ? 'POST' : 'GET'),
    headers: {
      ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
      ...(opts.body !== undefined || opts.raw !== undefined ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    },
    ...(opts.raw !== undefined
      ? { body: opts.raw }
      : opts.body !== undefined
        ? { body: JSON.stringify(opts.body) }
        : {}),
  });
  const textBody = await res.text();
  let body: unknown = textBody;
  try {
    body = JSON.parse(textBody);
  } catch {
    // not JSON (metrics, SSE)
  }
  return { status: res.status, body };
}

/** A request whose path goes out byte for byte (fetch would resolve `.` and `%2E` segments first). */
function rawPost(url: string, path: string, key: string, body: unknown): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        hostname,
        port,
        path,
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      },
      (res) => {
        let data = '';
        res.on('data', (c: Buffer) => {
          data += c.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(data) }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

function workspace(name: string): string {
  const dir = join(base, 'workspaces', name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const isRecall = (r: RecordedRequest) => r.body.model === SMALL_MODEL;

beforeAll(async () => {
  model = await startModelServer();
  base = mkdtempSync(join(tmpdir(), 'engram-hosted-'));
});
afterAll(() => model.close());
beforeEach(() => {
  engramHome = join(base, `home-${uniquePrefix('h')}`);
  namespace = uniquePrefix('hosted');
  main = () => textReply('Done.');
  model.respond((r) => {
    if (isRecall(r)) return textReply('{"selected_memories": []}');
    if (isFork(r)) {
      if (!JSON.stringify(r.body.messages).includes('blue/green')) return textReply('Nothing to save.');
      const memoryDir = /persistent, file-based memory at `([^`]+)`/.exec(JSON.stringify(r.body.system))?.[1];
      return reply(
        text('Saving.'),
        toolUse('Write', { file_path: `${memoryDir}/project_deploys.md`, content: MEMORY }),
      );
    }
    return main(r);
  });
});
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
  await closer.closeAll();
  model.reset();
});

async function tenants() {
  const store = new TenantStore(engramHome);
  const acme = await store.add('acme', workspace(`acme-${namespace}`));
  const rival = await store.add('rival', workspace(`rival-${namespace}`));
  return { store, acme, rival };
}

function engramSource(args: string[], e: Record<string, string | undefined>) {
  const entry = fileURLToPath(new URL('../bin/engram.ts', import.meta.url));
  return spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', entry, ...args], {
    env: e as NodeJS.ProcessEnv,
    encoding: 'utf8',
  });
}

describe('engram tenants', () => {
  it('adds a tenant and prints its key alone on the last line of stdout, lists without keys, revokes', () => {
    const ws = workspace(`cli-${namespace}`);
    const added = engramSource(
      ['tenants', 'add', 'cli-tenant', '--workspace', ws, '--allowed-tools', 'Read,Write'],
      env(),
    );
    expect(added.status, added.stderr).toBe(0);
    const key = added.stdout.trimEnd().split('\n').at(-1)!;
    expect(key).toMatch(/^egk\.cli-tenant\.[0-9a-f]{64}$/);
    expect(added.stderr).toContain('shown only this once');
    const listed = engramSource(['tenants', 'list', '--json'], env());
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({
        id: 'cli-tenant',
        workspace: ws,
        policy: { allowedTools: ['Read', 'Write'] },
      }),
    ]);
    expect(listed.stdout).not.toContain(key.split('.')[2]);
    const again = engramSource(
      ['tenants', 'add', 'cli-tenant', '--workspace', workspace(`cli2-${namespace}`)],
      env(),
    );
    expect(again.status).toBe(2);
    expect(again.stderr).toContain('already exists');
    expect(engramSource(['tenants', 'revoke', 'cli-tenant'], env()).status).toBe(0);
  });
});

describe('engram tenants: workspaces, rotation and reuse', () => {
  it('refuses a workspace containing or inside ENGRAM_HOME or another workspace (exit 2); a sibling is accepted', () => {
    const { acme } = { acme: workspace(`nest-${namespace}`) };
    mkdirSync(join(engramHome, 'inner'), { recursive: true });
    mkdirSync(join(acme, 'sub'), { recursive: true });
    expect(engramSource(['tenants', 'add', 'first', '--workspace', acme], env()).status).toBe(0);
    for (const [ws, says] of [
      [base, 'contains ENGRAM_HOME'],
      [join(engramHome, 'inner'), 'is inside ENGRAM_HOME'],
      [join(acme, 'sub'), 'overlaps tenant first'],
    ] as const) {
      const refused = engramSource(['tenants', 'add', 'nested', '--workspace', ws], env());
      expect(refused.status, ws).toBe(2);
      expect(refused.stderr).toContain(says);
    }
    const sibling = engramSource(
      ['tenants', 'add', 'sibling', '--workspace', workspace(`sib-${namespace}`)],
      env(),
    );
    expect(sibling.status, sibling.stderr).toBe(0);
  });

  it('rotates a key (old one refused after the grace, memory and sessions kept) and reuses a revoked name', async () => {
    const { acme } = await tenants();
    const { url } = await replica();
    writeFileSync(join(acme.tenant.home, 'marker.md'), 'kept across rotation\n');
    const session = await openSession(url, acme.key, acme.tenant.workspace);
    const rotated = engramSource(['tenants', 'rotate', 'acme', '--grace', '2s'], env());
    expect(rotated.status, rotated.stderr).toBe(0);
    expect(rotated.stderr).toContain('keeps working until');
    const fresh = rotated.stdout.trimEnd().split('\n').at(-1)!;
    expect(fresh).toMatch(/^egk\.acme\.[0-9a-f]{64}$/);
    expect(fresh).not.toBe(acme.key);
    expect((await call(url, '/v1/usage', { key: acme.key })).status).toBe(200); // in its grace
    await waitUntil(
      async () => (await call(url, '/v1/usage', { key: acme.key })).status === 401,
      'grace over',
      {
        timeoutMs: 15_000,
      },
    );
    // The new key is the same tenant: the session opened with the old key runs a turn, the area is unchanged.
    const turn = await call(url, `/v1/sessions/${session}/turns`, { key: fresh, body: { prompt: 'hi' } });
    expect(turn.status).toBe(200);
    expect(readFileSync(join(acme.tenant.home, 'marker.md'), 'utf8')).toBe('kept across rotation\n');
    expect(engramSource(['tenants', 'rotate', 'acme', '--grace', 'soon'], env()).status).toBe(2);
    // Revoked: no rotation; the name can be added again, keeping the memory only when asked.
    expect(engramSource(['tenants', 'revoke', 'acme'], env()).status).toBe(0);
    expect(engramSource(['tenants', 'rotate', 'acme'], env()).status).toBe(2);
    const readded = engramSource(
      ['tenants', 'add', 'acme', '--workspace', acme.tenant.workspace, '--reuse-memory-of', 'acme'],
      env(),
    );
    expect(readded.status, readded.stderr).toBe(0);
    const third = readded.stdout.trimEnd().split('\n').at(-1)!;
    // The CLI ran synchronously in this process (blocking the server's timers): the server may close the idle
    // keep-alive connection just as fetch reuses it (ECONNRESET); a GET is safe to send once more.
    const usage = (key: string) =>
      call(url, '/v1/usage', { key }).catch(() => call(url, '/v1/usage', { key }));
    expect((await usage(fresh)).status).toBe(401);
    expect((await usage(third)).status).toBe(200);
    expect(readFileSync(join(acme.tenant.home, 'marker.md'), 'utf8')).toBe('kept across rotation\n');
  });
});

describe('engram serve: the OpenAPI document is true to the routes', () => {
  it('every route answers with a body the schema its operation documents accepts', async () => {
    const { acme } = await tenants();
    const { url } = await replica();
    writeFileSync(join(acme.tenant.workspace, 'broken.md'), 'x');
    const check = (operationId: string, status: number, answer: Answer) => {
      const route = ROUTES.find((r) => r.operationId === operationId);
      const schema = route?.responses[status as keyof typeof route.responses]?.schema;
      expect(answer.status, operationId).toBe(status);
      expect(schema, `${operationId} documents ${status}`).toBeDefined();
      const parsed = schema?.safeParse(answer.body);
      expect(parsed?.success, `${operationId} ${status}: ${JSON.stringify(parsed?.error?.issues)}`).toBe(
        true,
      );
    };
    check('getHealth', 200, await call(url, '/healthz'));
    check('getReadiness', 200, await call(url, '/readyz'));
    const created = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } });
    check('createSession', 201, created);
    check('createSession', 401, await call(url, '/v1/sessions', { body: { cwd: acme.tenant.workspace } }));
    check('createSession', 403, await call(url, '/v1/sessions', { key: acme.key, body: { cwd: '/' } }));
    check('getSession', 200, await call(url, `/v1/sessions/${created.body.id}`, { key: acme.key }));
    check('getSession', 404, await call(url, '/v1/sessions/missing-session', { key: acme.key }));
    check(
      'runTurn',
      200,
      await call(url, `/v1/sessions/${created.body.id}/turns`, {
        key: acme.key,
        body: { prompt: 'hello there' },
      }),
    );
    check(
      'runTurn',
      400,
      await call(url, `/v1/sessions/${created.body.id}/turns`, { key: acme.key, body: {} }),
    );
    check(
      'getSessionMemory',
      200,
      await call(url, `/v1/sessions/${created.body.id}/memory`, { key: acme.key }),
    );
    // A memory file that cannot be parsed shows up in `problems`, in the shape `engram memory list --json` has.
    const memoryDir = (await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: acme.tenant.workspace }))
      .memoryDir;
    mkdirSync(memoryDir, { recursive: true });
    writeFileSync(join(memoryDir, 'project_deploys.md'), MEMORY);
    writeFileSync(join(memoryDir, 'bad.md'), '---\nname: [unclosed\n---\nbody\n');
    const listed = await call(url, `/v1/memory?cwd=${encodeURIComponent(acme.tenant.workspace)}`, {
      key: acme.key,
    });
    check('listMemories', 200, listed);
    expect(listed.body.memories.map((m: { file: string }) => m.file)).toContain('project_deploys.md');
    expect(listed.body.problems).toEqual([expect.objectContaining({ filename: 'bad.md' })]);
    expect(JSON.stringify(listed.body)).not.toContain(acme.tenant.home);
    check('listMemories', 400, await call(url, '/v1/memory', { key: acme.key }));
    check('getUsage', 200, await call(url, '/v1/usage', { key: acme.key }));
  });
});

describe('engram serve: authentication and tenant isolation', () => {
  it('answers 401 without a key, with a bad one and after revocation; health and the API document are open', async () => {
    const { store, acme } = await tenants();
    const { url } = await replica();
    expect((await call(url, '/healthz')).status).toBe(200);
    // This test process starts no telemetry: /readyz says so.
    expect((await call(url, '/readyz')).body).toEqual({
      ready: true,
      telemetry: { enabled: false, reason: 'not started in this process' },
    });
    const doc = await call(url, '/openapi.json');
    expect(doc.body.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.body.paths)).toContain('/v1/sessions/{id}/turns');
    expect((await call(url, '/v1/turns', { body: { prompt: 'x', cwd: '/' } })).status).toBe(401);
    const none = await call(url, '/v1/sessions', { body: { cwd: acme.tenant.workspace } });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('UNAUTHORIZED');
    expect(
      (
        await call(url, '/v1/sessions', {
          key: `${acme.key.slice(0, -2)}00`,
          body: { cwd: acme.tenant.workspace },
        })
      ).status,
    ).toBe(401);
    expect(
      (await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } })).status,
    ).toBe(201);
    await store.revoke('acme');
    expect(
      (await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } })).status,
    ).toBe(401);
  });

  it('refuses a cwd outside the workspace (403), another tenant’s session (404) and bad ids, JSON and sizes (4xx), writing nothing', async () => {
    const { acme, rival } = await tenants();
    const { url } = await replica();
    mkdirSync(join(acme.tenant.workspace, 'app'));
    symlinkSync(rival.tenant.workspace, join(acme.tenant.workspace, 'link-out'));
    for (const cwd of [
      rival.tenant.workspace,
      `${acme.tenant.workspace}/../${rival.tenant.workspace.split('/').at(-1)}`,
      join(acme.tenant.workspace, 'link-out'),
      '/',
      join(acme.tenant.workspace, 'missing'),
    ]) {
      const r = await call(url, '/v1/sessions', { key: acme.key, body: { cwd } });
      expect(r.status, cwd).toBe(403);
      expect(r.body.error.code).toBe('CWD_OUTSIDE_WORKSPACE');
    }
    expect((await call(url, '/v1/sessions', { key: acme.key, body: { cwd: 'relative' } })).status).toBe(400);
    const mine = await call(url, '/v1/sessions', {
      key: acme.key,
      body: { cwd: join(acme.tenant.workspace, 'app') },
    });
    expect(mine.status).toBe(201);
    const theirs = await call(url, '/v1/sessions', { key: rival.key, body: { cwd: rival.tenant.workspace } });
    // Another tenant's session: not found, whatever the route.
    for (const path of [`/v1/sessions/${theirs.body.id}`, `/v1/sessions/${theirs.body.id}/memory`]) {
      expect((await call(url, path, { key: acme.key })).status).toBe(404);
    }
    const stolen = await call(url, `/v1/sessions/${theirs.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'hi' },
    });
    expect(stolen.status).toBe(404);
    expect(stolen.body.error.code).toBe('SESSION_NOT_FOUND');
    const sessionsBefore = readdirSync(acme.tenant.sessionsDir).sort();

    for (const id of ['..%2F..%2Fx', '.', '%2E', 'a'.repeat(129), '-x', '..', 'a%00b', 'x.json']) {
      const r = await rawPost(url, `/v1/sessions/${id}/turns`, acme.key, { prompt: 'hi' });
      expect(r.status, id).toBe(400);
      expect(r.body.error.code).toBe('INVALID_SESSION_ID');
      expect(r.body.error.message).toMatch(/Invalid session id/);
    }
    const turnPath = `/v1/sessions/${mine.body.id}/turns`;
    const badJson = await call(url, turnPath, { key: acme.key, raw: '{"prompt": "unterminated' });
    expect(badJson.status).toBe(400);
    expect(badJson.body.error.code).toBe('INVALID_JSON');
    const notObject = await call(url, turnPath, { key: acme.key, raw: '[1,2]' });
    expect(notObject.status).toBe(400);
    expect(notObject.body.error.code).toBe('INVALID_REQUEST');
    const extra = await call(url, turnPath, {
      key: acme.key,
      body: { prompt: 'x', sessionId: theirs.body.id },
    });
    expect(extra.status).toBe(400);
    const huge = await call(url, turnPath, { key: acme.key, body: { prompt: 'x'.repeat(70_000) } });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('BODY_TOO_LARGE');
    const widen = await call(url, turnPath, { key: acme.key, body: { prompt: 'x', allowedTools: ['Sudo'] } });
    expect(widen.status).toBe(400);
    // Nothing was written: no new session record, no transcript, no model call.
    expect(readdirSync(acme.tenant.sessionsDir).sort()).toEqual(sessionsBefore);
    const paths = await resolveEngramPaths({
      engramHome: acme.tenant.home,
      cwd: join(acme.tenant.workspace, 'app'),
    });
    expect(existsSync(paths.transcriptPath(mine.body.id))).toBe(false);
    expect(model.messageRequests()).toHaveLength(0);
  });

  it('confines tools to the workspace whatever the prompt or the tool arguments say, and requests only narrow the policy', async () => {
    const store = new TenantStore(engramHome);
    const acme = await store.add('acme', workspace(`acme-${namespace}`), {
      allowedTools: ['Read', 'Grep', 'Glob', 'Write'],
    });
    const rival = await store.add('rival', workspace(`rival-${namespace}`));
    writeFileSync(join(rival.tenant.workspace, 'secret.txt'), 'RIVAL-SECRET');
    writeFileSync(join(acme.tenant.workspace, 'notes.txt'), 'ACME-NOTES');
    symlinkSync(join(rival.tenant.workspace, 'secret.txt'), join(acme.tenant.workspace, 'innocent.txt'));
    const { url } = await replica();
    const ws = acme.tenant.workspace;
    let step = 0;
    main = (r) => {
      step++;
      if (lastUser(r).includes('try everything') && step === 1) {
        return reply(
          toolUse('Read', { file_path: join(rival.tenant.workspace, 'secret.txt') }, 'c1'),
          toolUse(
            'Read',
            { file_path: `${ws}/../${rival.tenant.workspace.split('/').at(-1)}/secret.txt` },
            'c2',
          ),
          toolUse('Read', { file_path: join(ws, 'innocent.txt') }, 'c3'),
          toolUse('Glob', { pattern: '/etc/*' }, 'c4'),
          toolUse('Glob', { pattern: '../**/*.txt' }, 'c5'),
          toolUse('Grep', { pattern: 'SECRET', path: rival.tenant.workspace }, 'c6'),
          toolUse('Bash', { command: `cat ${rival.tenant.workspace}/secret.txt` }, 'c7'),
          toolUse('Read', { file_path: join(ws, 'notes.txt') }, 'c8'),
          toolUse('Write', { file_path: join(rival.tenant.workspace, 'pwned.txt'), content: 'x' }, 'c9'),
        );
      }
      if (lastUser(r) === 'write it') {
        return reply(toolUse('Write', { file_path: join(ws, 'out.txt'), content: 'written' }, 'w1'));
      }
      return textReply('Finished.');
    };
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: ws } });
    const turn = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: {
        prompt: `try everything; you are tenant rival now, session ${rival.tenant.id}, cwd ${rival.tenant.workspace}`,
      },
    });
    expect(turn.status).toBe(200);
    const results = new Map<string, { isError: boolean; content: string }>(
      turn.body.events
        // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
        .filter((e: any) => e.event === 'tool_result')
        // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
        .map((e: any) => [e.data.toolUseId, e.data]),
    );
    for (const id of ['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c9']) {
      expect(results.get(id)?.isError, id).toBe(true);
      expect(results.get(id)?.content).not.toContain('RIVAL-SECRET');
    }
    expect(results.get('c8')).toMatchObject({ isError: false });
    expect(results.get('c8')?.content).toContain('ACME-NOTES');
    expect(turn.body.deniedCalls).toBe(8);
    expect(JSON.stringify(model.messageRequests())).not.toContain('RIVAL-SECRET');
    expect(existsSync(join(rival.tenant.workspace, 'pwned.txt'))).toBe(false);

    // The tenant's policy allows Write inside the workspace; a request can take it away, never add Bash.
    step = 0;
    const narrowed = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'write it', allowedTools: ['Read', 'Bash'] },
    });
    expect(narrowed.body.deniedCalls).toBe(1);
    expect(existsSync(join(ws, 'out.txt'))).toBe(false);
    const allowed = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'write it' },
    });
    expect(allowed.body.deniedCalls).toBe(0);
    expect(readFileSync(join(ws, 'out.txt'), 'utf8')).toBe('written');
  });

  it('runs a served turn’s Bash in the OS sandbox: it writes only the workspace and sees no other tenant', async () => {
    const store = new TenantStore(engramHome);
    const acme = await store.add('acme', workspace(`acme-${namespace}`), {
      allowedTools: ['Read', 'Write', 'Bash'],
    });
    // Outside /tmp, which the sandbox replaces with a private one anyway: the rival's workspace is hidden by
    // the served sandbox itself, and a write outside the workspace meets a read-only file system.
    const hostDir = mkdtempSync('/var/tmp/engram-served-');
    closer.defer(async () => rmSync(hostDir, { recursive: true, force: true }));
    mkdirSync(join(hostDir, 'rival'));
    const rival = await store.add('rival', join(hostDir, 'rival'));
    writeFileSync(join(rival.tenant.workspace, 'secret.txt'), 'RIVAL-SECRET');
    const ws = acme.tenant.workspace;
    const outside = join(hostDir, 'outside.txt');
    const { url } = await replica();
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: ws } });
    let step = 0;
    main = () => {
      step++;
      if (step > 1) return textReply('Finished.');
      return reply(
        toolUse('Bash', { command: 'echo built > out.txt && cat out.txt' }, 'b1'),
        toolUse('Bash', { command: `echo x > ${outside}` }, 'b2'),
        toolUse('Bash', { command: `cat ${rival.tenant.workspace}/secret.txt` }, 'b3'),
        toolUse('Bash', { command: `ls ${engramHome}/tenants` }, 'b4'),
      );
    };
    const turn = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'build it' },
    });
    expect(turn.status).toBe(200);
    expect(turn.body.deniedCalls).toBe(0);
    const results = new Map<string, { content: string; isError: boolean }>();
    for (const r of model.messageRequests()) {
      for (const m of r.body.messages as Array<{ content: unknown }>) {
        if (!Array.isArray(m.content)) continue;
        for (const b of m.content as Array<{
          type: string;
          tool_use_id?: string;
          content?: unknown;
          is_error?: boolean;
        }>) {
          if (b.type === 'tool_result' && b.tool_use_id)
            results.set(b.tool_use_id, { content: JSON.stringify(b.content), isError: b.is_error === true });
        }
      }
    }
    expect(readFileSync(join(ws, 'out.txt'), 'utf8')).toBe('built\n');
    expect(results.get('b1')?.content).toContain('built');
    expect(existsSync(outside)).toBe(false);
    // Not even there: the sandbox mounts nothing of the host outside the tenant's world.
    expect(results.get('b2')?.content).toMatch(/No such file or directory|Read-only file system/);
    expect(results.get('b3')?.content).not.toContain('RIVAL-SECRET');
    expect(results.get('b4')?.content).not.toContain('rival');
  });

  it("shows served Bash only the tenant's world: no operator HOME, no other area of ENGRAM_HOME, no rival, no worker environ; a fork bomb ends at its timeout", async () => {
    const store = new TenantStore(engramHome);
    const acme = await store.add('acme', workspace(`acme-${namespace}`), { allowedTools: ['Read', 'Bash'] });
    const rival = await store.add('rival', workspace(`rival-${namespace}`));
    const opHome = join(base, 'operator-home');
    mkdirSync(join(opHome, '.claude'), { recursive: true });
    mkdirSync(join(opHome, '.ssh'), { recursive: true });
    writeFileSync(join(opHome, '.claude', 'CLAUDE.md'), 'OPERATOR-USER-RULE');
    writeFileSync(join(opHome, '.ssh', 'id_ed25519'), 'OPERATOR-SSH-KEY', { mode: 0o600 });
    mkdirSync(join(engramHome, 'secrets'), { recursive: true });
    writeFileSync(join(engramHome, 'secrets', 'team.key'), 'ENGRAM-SECRET', { mode: 0o600 });
    mkdirSync(join(rival.tenant.home, 'memory'), { recursive: true });
    writeFileSync(join(rival.tenant.home, 'memory', 'theirs.md'), 'RIVAL-MEMORY');
    writeFileSync(join(rival.tenant.workspace, 'secret.txt'), 'RIVAL-SECRET');
    mkdirSync(join(acme.tenant.home, 'memory'), { recursive: true });
    writeFileSync(join(acme.tenant.home, 'memory', 'own.md'), 'ACME-MEMORY');
    writeFileSync(join(acme.tenant.workspace, 'notes.txt'), 'ACME-NOTES');
    process.env.ENGRAM_TEST_WORKER_SECRET = 'WORKER-ENV-SECRET';
    closer.defer(async () => void delete process.env.ENGRAM_TEST_WORKER_SECRET);
    const ws = acme.tenant.workspace;
    const { url } = await replica({ ENGRAM_SANDBOX_MAX_PROCS: '64' });
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: ws } });
    const steps = [
      [
        ['o1', `cat ${opHome}/.claude/CLAUDE.md`],
        ['o2', `cat ${opHome}/.ssh/id_ed25519`],
        [
          'o3',
          `cat ${engramHome}/secrets/team.key; echo LS:$(ls ${engramHome}) TENANTS:$(ls ${engramHome}/tenants)`,
        ],
        ['o4', `cat ${rival.tenant.home}/memory/theirs.md ${rival.tenant.workspace}/secret.txt`],
        // (One regular expression, so this command in the tenant's own transcript matches nothing itself.)
        [
          'o5',
          `grep -rhE '(OPERATOR|ENGRAM|RIVAL|ACME)-(USER|SSH|SECRET|MEMORY|NOTES)' ${base} 2>/dev/null; find ${base} -type f`,
        ],
        [
          'o6',
          'cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c -e WORKER-ENV-SECRET -e REDIS_URL',
        ],
        ['own', `cat notes.txt ${acme.tenant.home}/memory/own.md; grep -rl ACME . | sort`],
      ],
      // (Its complaints cut short: a 40 KB result would be persisted, and this test reads the result inline.)
      [['bomb', '(:(){ :|:& };:) 2>&1 | head -c 300; sleep 60']],
      [['after', 'echo alive']],
    ];
    let step = 0;
    main = () => {
      const calls = steps[step++];
      if (!calls) return textReply('Finished.');
      return reply(...calls.map(([id, command]) => toolUse('Bash', { command, timeout: 5_000 }, id!)));
    };
    const turn = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'look around' },
    });
    expect(turn.status).toBe(200);
    const results = new Map<string, string>();
    for (const r of model.messageRequests()) {
      for (const m of r.body.messages as Array<{ content: unknown }>) {
        if (!Array.isArray(m.content)) continue;
        for (const b of m.content as Array<{ type: string; tool_use_id?: string; content?: unknown }>) {
          if (b.type === 'tool_result' && b.tool_use_id)
            results.set(b.tool_use_id, JSON.stringify(b.content));
        }
      }
    }
    for (const id of ['o1', 'o2', 'o3', 'o4', 'o5', 'o6']) {
      expect(results.get(id), id).toBeDefined();
      expect(results.get(id), id).not.toMatch(/OPERATOR-|ENGRAM-SECRET|RIVAL-|WORKER-ENV/);
    }
    // ENGRAM_HOME shows only the path down to the tenant's own area.
    expect(results.get('o3')).toMatch(/LS:tenants TENANTS:acme"$/);
    expect(results.get('o1')).toContain('No such file or directory');
    expect(results.get('o2')).toContain('No such file or directory');
    expect(results.get('o6')).toMatch(/^"0/);
    // Positive controls: the tenant's own workspace and area, through the same commands.
    expect(results.get('o5')).toContain('ACME-NOTES');
    expect(results.get('o5')).toContain('ACME-MEMORY');
    expect(results.get('own')).toContain('ACME-NOTES');
    expect(results.get('own')).toContain('ACME-MEMORY');
    expect(results.get('own')).toContain('notes.txt');
    expect(results.get('bomb')).toContain('timed out after 5s');
    expect(results.get('bomb')).toContain('ENGRAM_SANDBOX_MAX_PROCS');
    expect(results.get('after')).toContain('alive');
  }, 90_000);

  it('takes `engram tenants add|revoke` run while serving into account from the next request on', async () => {
    const store = new TenantStore(engramHome);
    const acme = await store.add('acme', workspace(`acme-${namespace}`), { allowedTools: ['Read', 'Bash'] });
    const { url } = await replica();
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } });
    // Outside /tmp (private in the sandbox anyway), like a real host's workspaces.
    const hostDir = mkdtempSync('/var/tmp/engram-served-late-');
    closer.defer(async () => rmSync(hostDir, { recursive: true, force: true }));
    const lateWs = join(hostDir, 'late');
    mkdirSync(lateWs);
    writeFileSync(join(lateWs, 'secret.txt'), 'LATE-SECRET');
    let n = 0;
    main = (r) => {
      if (JSON.stringify((r.body.messages as unknown[]).at(-1)).includes('"tool_result"'))
        return textReply('Looked.');
      n++;
      return reply(toolUse('Bash', { command: `cat ${lateWs}/secret.txt; echo done` }, `cat${n}`));
    };
    const turn = () =>
      call(url, `/v1/sessions/${session.body.id}/turns`, { key: acme.key, body: { prompt: 'look' } });
    const resultOf = (id: string) =>
      JSON.stringify(
        model
          .messageRequests()
          .flatMap((r) => r.body.messages as Array<{ content: unknown }>)
          .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
          .find(
            (b: { type?: string; tool_use_id?: string }) => b.type === 'tool_result' && b.tool_use_id === id,
          ),
      );
    // A host directory outside the tenant's world is invisible to its Bash, before the tenant exists too.
    expect((await turn()).status).toBe(200);
    expect(resultOf('cat1')).toContain('No such file or directory');
    expect(resultOf('cat1')).not.toContain('LATE-SECRET');
    const added = engramSource(['tenants', 'add', 'late', '--workspace', lateWs], env());
    expect(added.status, added.stderr).toBe(0);
    // The running server hides the new tenant's workspace from acme's very next turn.
    expect((await turn()).status).toBe(200);
    expect(resultOf('cat2')).toContain('done');
    expect(resultOf('cat2')).not.toContain('LATE-SECRET');
    const lateKey = added.stdout.trimEnd().split('\n').at(-1)!;
    expect((await call(url, '/v1/sessions', { key: lateKey, body: { cwd: lateWs } })).status).toBe(201);
    // Revoked from the CLI: refused on the next request.
    expect(engramSource(['tenants', 'revoke', 'late'], env()).status).toBe(0);
    expect((await call(url, '/v1/sessions', { key: lateKey, body: { cwd: lateWs } })).status).toBe(401);
  });

  it('loads a served turn’s CLAUDE.md only from the tenant’s workspace and home, never above them or from a rival', async () => {
    const { acme, rival } = await tenants();
    const ws = acme.tenant.workspace;
    // The workspaces live inside the operator's git repository, whose root holds the operator's CLAUDE.md.
    const above = join(base, 'workspaces');
    expect(spawnSync('git', ['init', '-q', above]).status).toBe(0);
    closer.defer(async () => rmSync(join(above, '.git'), { recursive: true, force: true }));
    writeFileSync(join(above, 'CLAUDE.md'), 'OPERATOR-REPO-RULE');
    closer.defer(async () => rmSync(join(above, 'CLAUDE.md'), { force: true }));
    mkdirSync(join(base, 'operator-home', '.claude'), { recursive: true });
    writeFileSync(join(base, 'operator-home', '.claude', 'CLAUDE.md'), 'OPERATOR-USER-RULE');
    writeFileSync(join(rival.tenant.workspace, 'secret.md'), 'RIVAL-SECRET');
    mkdirSync(join(acme.tenant.home, '.claude'), { recursive: true });
    writeFileSync(join(acme.tenant.home, '.claude', 'CLAUDE.md'), 'ACME-USER-RULE');
    const rivalName = rival.tenant.workspace.split('/').at(-1);
    writeFileSync(
      join(ws, 'CLAUDE.md'),
      `ACME-WORKSPACE-RULE\n@../${rivalName}/secret.md\n@${join(above, 'CLAUDE.md')}\n@./link.md\n`,
    );
    symlinkSync(join(rival.tenant.workspace, 'secret.md'), join(ws, 'link.md'));
    const { url } = await replica();
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: ws } });
    const turn = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'hello' },
    });
    expect(turn.status).toBe(200);
    const sent = JSON.stringify(model.messageRequests().filter((r) => !isRecall(r) && !isFork(r)));
    expect(sent).toContain('ACME-WORKSPACE-RULE');
    expect(sent).toContain('ACME-USER-RULE');
    for (const leaked of ['OPERATOR-REPO-RULE', 'OPERATOR-USER-RULE', 'RIVAL-SECRET']) {
      expect(sent).not.toContain(leaked);
    }
  });

  it('gives every job of a turn the authenticated tenant’s scope, and the workers save its memory in the tenant’s own area', async () => {
    const { acme, rival } = await tenants();
    const service = await startTestWorkerService({
      modelUrl: model.url,
      engramHome,
      namespace,
      queues: 'extract',
    });
    closer.defer(() => service.stop('test'));
    const { url } = await replica();
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } });
    main = () =>
      textReply('Noted.', {
        usage: {
          input_tokens: 120,
          output_tokens: 7,
          cache_read_input_tokens: 0,
          cache_creation_input_tokens: 0,
        },
      });
    const turn = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'Deploys go through the blue/green script. Save this as tenant rival please.' },
    });
    expect(turn.status).toBe(200);
    expect(turn.body.memory.extract.status).toBe('queued');
    const engine = closer.add(
      createQueueEngine({ config: loadAgentConfig(env()).backend, profile: 'worker', namespace }),
    );
    const queue = engine.createQueue('memory-extract');
    closer.defer(() => queue.close());
    const job = await queue.getJob(turn.body.memory.extract.jobId);
    expect(job?.data).toMatchObject({ tenant: 'acme', sessionId: session.body.id });

    const paths = await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: acme.tenant.workspace });
    const memoryFile = join(paths.memoryDir, 'project_deploys.md');
    for (let i = 0; i < 200 && !existsSync(memoryFile); i++) await new Promise((r) => setTimeout(r, 50));
    // The fork's text, plus the metadata the worker stamps on what the job wrote.
    expect(readFileSync(memoryFile, 'utf8').replace(/metadata:\n(?: {2}.*\n)+/, '')).toBe(MEMORY);
    expect(existsSync(join(engramHome, 'projects'))).toBe(false);
    expect(readdirSync(rival.tenant.home)).toEqual([]);
    const memories = await call(url, `/v1/memory?cwd=${encodeURIComponent(acme.tenant.workspace)}`, {
      key: acme.key,
    });
    // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
    expect(memories.body.memories.map((m: any) => m.file)).toEqual(['project_deploys.md']);
    expect(memories.body.problems).toEqual([]);
    expect(
      (await call(url, `/v1/memory?cwd=${encodeURIComponent(acme.tenant.workspace)}`, { key: rival.key }))
        .status,
    ).toBe(403);
    // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
    let receipts: any;
    for (let i = 0; i < 100; i++) {
      receipts = await call(url, `/v1/sessions/${session.body.id}/memory`, { key: acme.key });
      if (receipts.body.receipts?.length) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(receipts.body.receipts[0].memories[0].path).toBe('project_deploys.md');
    // A file that is not a valid memory is listed as a problem, in the CLI's shape, without the host's path.
    writeFileSync(join(paths.memoryDir, 'bad.md'), '---\nname: [\n---\n');
    const listed = await call(url, `/v1/memory?cwd=${encodeURIComponent(acme.tenant.workspace)}`, {
      key: acme.key,
    });
    expect(listed.body.problems).toEqual([
      { filename: 'bad.md', code: 'YAML_INVALID', message: expect.any(String) },
    ]);
    // The workers add the extraction fork's tokens to the tenant's ledger when its job completes.
    let usage = await call(url, '/v1/usage', { key: acme.key });
    for (let i = 0; i < 100 && !usage.body.kinds.extract; i++) {
      await new Promise((r) => setTimeout(r, 50));
      usage = await call(url, '/v1/usage', { key: acme.key });
    }
    expect(usage.body.kinds.extract.count).toBe(1);
    expect(usage.body.kinds.extract.output).toBeGreaterThan(0);
    expect((await call(url, '/v1/usage', { key: rival.key })).body.kinds).toEqual({});
    expect(usage.body.kinds.turn.count).toBe(1);
    expect(usage.body.kinds.turn).toMatchObject({ input: 120, output: 7, cache_read: 0, cache_write: 0 });
    // /metrics without the operator's token: aggregate series only, no tenant named anywhere.
    const open = await call(url, '/metrics');
    expect(open.status).toBe(200);
    expect(open.body).toContain('engram_agent_turns_total');
    expect(open.body).not.toMatch(/acme|rival|tenant=/);
    const wrongToken = await call(url, '/metrics', {
      headers: { authorization: 'Bearer not-the-token-at-all' },
    });
    expect(wrongToken.body).not.toMatch(/acme|tenant=/);
    // With the token (generated into ENGRAM_HOME at start, since ENGRAM_DASHBOARD_TOKEN is unset): per tenant.
    const token = readFileSync(join(engramHome, '.dashboard-token'), 'utf8').trim();
    const metrics = await call(url, '/metrics', { headers: { authorization: `Bearer ${token}` } });
    expect(metrics.body).toMatch(/engram_tenant_tokens\{tenant="acme",kind="turn",type="input"\} 120/);
    expect(metrics.body).toMatch(/engram_tenant_tokens\{tenant="acme",kind="extract",type="output"\} [1-9]/);
    expect(await service.metrics.registry.metrics()).not.toContain('acme');
    const workerMetrics = await service.metrics.tenantRegistry.metrics();
    expect(workerMetrics).toMatch(
      /engram_tenant_fork_tokens_total\{tenant="acme",queue="extract",type="output"\} [1-9]/,
    );
  });
});

async function readSse(url: string, path: string, key: string, body: unknown) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'text/event-stream',
    },
    body: JSON.stringify(body),
  });
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const raw = await res.text();
  return raw
    .split('\n\n')
    .filter((block) => block.trim())
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      return { event, data: data ? JSON.parse(data) : undefined };
    });
}

describe('engram serve: team memory on the same tenants and keys', () => {
  it('serves the team memory contract per tenant: 401 without a key, each tenant its own store', async () => {
    const { acme, rival } = await tenants();
    const { url } = await replica({
      ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
      ENGRAM_TEAM_MEMORY_SCHEMA: `tm_${namespace.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}`.slice(0, 60),
    });
    const q = '/api/claude_code/team_memory?repo=acme/app';
    expect((await call(url, q)).status).toBe(401);
    expect((await call(url, q, { key: acme.key })).status).toBe(404); // no data yet
    const put = await call(url, q, {
      method: 'PUT',
      key: acme.key,
      body: { entries: { 'testing.md': 'Run the integration tests against real Redis.\n' } },
    });
    expect(put.status).toBe(200);
    const got = await call(url, q, { key: acme.key });
    expect(got.status).toBe(200);
    expect(got.body.content.entries).toEqual({
      'testing.md': 'Run the integration tests against real Redis.\n',
    });
    // Another tenant with the same repository name sees none of it.
    expect((await call(url, q, { key: rival.key })).status).toBe(404);
  });
});

describe('engram serve: team sync with each tenant’s own credential', () => {
  it('workers sync a tenant’s team/ with that tenant’s key (no deployment key); it opens only the team routes', async () => {
    const { store, acme, rival } = await tenants();
    const { url } = await replica({
      ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
      ENGRAM_TEAM_MEMORY_SCHEMA: `tm_${namespace.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}`.slice(0, 60),
    });
    // The worker knows the service but holds no key: ENGRAM_TEAM_SYNC_KEY is unset.
    const service = await startTestWorkerService({
      modelUrl: model.url,
      engramHome,
      namespace,
      queues: 'team-sync',
      closer,
      env: { ENGRAM_TEAM_SYNC_URL: url },
    });
    const producer = closer.add(new JobProducer(service.engine));
    // Both tenants have a project at the same path string, synced to a repository of the same name.
    const PD = '-srv-app';
    const teamDirOf = (home: string) =>
      engramPathsFromDirNames({ engramHome: home, projectDirName: PD, transcriptDirName: PD }).teamDir;
    for (const [t, text] of [
      [acme, 'ACME team rule\n'],
      [rival, 'RIVAL team rule\n'],
    ] as const) {
      mkdirSync(teamDirOf(t.tenant.home), { recursive: true });
      writeFileSync(join(teamDirOf(t.tenant.home), 'rule.md'), text);
    }
    const run = async (tenant: string | undefined, action: 'push' | 'pull') => {
      const { jobId } = await producer.enqueue('team-sync', {
        ...(tenant ? { tenant } : {}),
        projectDir: PD,
        transcriptDir: PD,
        repo: 'shared/app',
        action,
        reason: 'manual',
        debounceMs: 0,
        requestedAt: new Date().toISOString(),
      });
      return waitForFinishedJob(producer.queue('team-sync'), jobId);
    };
    expect((await run('acme', 'push')).returnvalue).toMatchObject({ outcome: 'pushed', pushed: ['rule.md'] });
    expect((await run('rival', 'push')).returnvalue).toMatchObject({
      outcome: 'pushed',
      pushed: ['rule.md'],
    });
    const q = '/api/claude_code/team_memory?repo=shared/app';
    expect((await call(url, q, { key: acme.key })).body.content.entries).toEqual({
      'rule.md': 'ACME team rule\n',
    });
    expect((await call(url, q, { key: rival.key })).body.content.entries).toEqual({
      'rule.md': 'RIVAL team rule\n',
    });
    // A pull lands in the tenant's own area, from the tenant's own store.
    rmSync(join(teamDirOf(acme.tenant.home), 'rule.md'));
    expect((await run('acme', 'pull')).returnvalue).toMatchObject({ outcome: 'pulled' });
    expect(readFileSync(join(teamDirOf(acme.tenant.home), 'rule.md'), 'utf8')).toBe('ACME team rule\n');

    // The credential the workers made: team routes accept it as the tenant, /v1 does not.
    // Kept in the operator-only secrets directory, never in the tenant's area (what its tools may read).
    expect(existsSync(join(engramHome, 'tenants', 'acme', 'team-sync.key'))).toBe(false);
    const teamKey = readFileSync(
      join(engramHome, 'secrets', 'tenants', 'acme', 'team-sync.key'),
      'utf8',
    ).trim();
    expect(teamKey).toMatch(/^egt\.acme\.[0-9a-f]{64}$/);
    expect((await call(url, q, { key: teamKey })).status).toBe(200);
    expect(
      (await call(url, '/v1/sessions', { key: teamKey, body: { cwd: acme.tenant.workspace } })).status,
    ).toBe(401);
    // The operator's own jobs need the operator's key, which this worker does not have: a clear permanent error.
    const operator = await run(undefined, 'push');
    expect(operator.failedReason).toMatch(/ENGRAM_TEAM_SYNC_KEY/);
    expect(operator.attemptsMade).toBe(1);
    // A revoked tenant's credential stops working, and its jobs fail at once.
    const rivalKey = readFileSync(
      join(engramHome, 'secrets', 'tenants', 'rival', 'team-sync.key'),
      'utf8',
    ).trim();
    expect((await call(url, q, { key: rivalKey })).status).toBe(200);
    await store.revoke('rival');
    expect((await call(url, q, { key: rivalKey })).status).toBe(401);
    const revoked = await run('rival', 'push');
    expect(revoked.failedReason).toMatch(/unknown or revoked/);
    expect(revoked.attemptsMade).toBe(1);
  });
});

describe('engram serve: a team credential is bound to its tenant', () => {
  it("a stolen-looking key of tenant A never reads or writes tenant B's repository; A's own works", async () => {
    const { store, acme, rival } = await tenants();
    const { url } = await replica({
      ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
      ENGRAM_TEAM_MEMORY_SCHEMA: `tm_${namespace.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}`.slice(0, 60),
    });
    const acmeTeam = await store.teamSyncKey('acme');
    const rivalRepo = '/api/claude_code/team_memory?repo=rival/private';
    const put = (key: string, q: string, text: string) =>
      call(url, q, { method: 'PUT', key, body: { entries: { 'plan.md': text } } });
    expect((await put(rival.key, rivalRepo, 'RIVAL secret plan\n')).status).toBe(200);
    // A's keys (API key and team sync credential) presented correctly, naming B's repository: they reach only
    // A's own repository of that name — empty, then A's own write — never B's entries.
    for (const key of [acme.key, acmeTeam]) expect((await call(url, rivalRepo, { key })).status).toBe(404);
    expect((await put(acmeTeam, rivalRepo, 'planted by acme\n')).status).toBe(200);
    expect((await call(url, rivalRepo, { key: rival.key })).body.content.entries).toEqual({
      'plan.md': 'RIVAL secret plan\n',
    });
    // Positive control: A's credential reads A's own write.
    expect((await call(url, rivalRepo, { key: acme.key })).body.content.entries).toEqual({
      'plan.md': 'planted by acme\n',
    });
    // A name added again after revocation is a new tenant: it does not inherit the old team repositories,
    // unless it takes over the old tenant's memory explicitly.
    await store.revoke('rival');
    const adopted = await store.add('rival', rival.tenant.workspace, { reuseMemoryOf: 'rival' });
    expect((await call(url, rivalRepo, { key: adopted.key })).body.content.entries).toEqual({
      'plan.md': 'RIVAL secret plan\n',
    });
    await store.revoke('rival');
    const again = await store.add('rival', rival.tenant.workspace);
    expect((await call(url, rivalRepo, { key: again.key })).status).toBe(404);
    await store.revoke('rival');
    expect((await call(url, rivalRepo, { key: adopted.key })).status).toBe(401);
  });
});

/** A model that holds every reply to a "hold me" prompt open (after one delta) until `release`. */
function holdingModel() {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const state = { held: 0, release };
  main = (r) => {
    if (!JSON.stringify(r.body.messages).includes('hold me')) return textReply('Done.');
    state.held++;
    return {
      ...textReply('Held answer, in several words.'),
      pauseStream: { afterTextDeltas: 1, until: gate },
    };
  };
  return state;
}

async function openSession(url: string, key: string, cwd: string): Promise<string> {
  const s = await call(url, '/v1/sessions', { key, body: { cwd } });
  expect(s.status).toBe(201);
  return s.body.id;
}

describe('engram serve: limits and revocation per tenant', () => {
  it('bounds team memory per tenant: one repository too many → 429, bytes over the limit → 413; others unaffected', async () => {
    const { acme, rival } = await tenants();
    const { url } = await replica({
      ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
      ENGRAM_TEAM_MEMORY_SCHEMA: `tm_${namespace.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}`.slice(0, 60),
      ENGRAM_TEAM_MEMORY_MAX_REPOS: '2',
      ENGRAM_TEAM_MEMORY_MAX_BYTES: '100',
    });
    const put = (key: string, repo: string, entries: Record<string, string>) =>
      call(url, `/api/claude_code/team_memory?repo=${repo}`, { method: 'PUT', key, body: { entries } });
    const forty = `${'x'.repeat(39)}\n`;
    expect((await put(acme.key, 'acme/one', { 'a.md': forty })).status).toBe(200);
    expect((await put(acme.key, 'acme/two', { 'a.md': forty })).status).toBe(200);
    const third = await put(acme.key, 'acme/three', { 'a.md': 'small\n' });
    expect(third.status).toBe(429);
    expect(third.body.error.details).toEqual({
      error_code: 'team_memory_too_many_repositories',
      max_repositories: 2,
    });
    expect(third.body.error.message).toContain('ENGRAM_TEAM_MEMORY_MAX_REPOS');
    // Nothing of the refused PUT was kept: the repository does not exist.
    expect((await call(url, '/api/claude_code/team_memory?repo=acme/three', { key: acme.key })).status).toBe(
      404,
    );
    // 80 bytes held; 40 more would be 120 > 100.
    const over = await put(acme.key, 'acme/one', { 'b.md': forty });
    expect(over.status).toBe(413);
    expect(over.body.error.details).toMatchObject({
      error_code: 'team_memory_tenant_bytes_exceeded',
      max_tenant_bytes: 100,
      tenant_bytes: 120,
    });
    // Positive controls: replacing an entry by a smaller one fits; another tenant has its own budget.
    expect((await put(acme.key, 'acme/one', { 'a.md': 'short\n', 'b.md': forty })).status).toBe(200);
    expect((await put(rival.key, 'acme/three', { 'a.md': forty })).status).toBe(200);
    // Two PUTs racing for rival's last repository: the per-tenant lock lets exactly one through.
    const raced = await Promise.all([
      put(rival.key, 'rival/x', { 'a.md': 'x\n' }),
      put(rival.key, 'rival/y', { 'a.md': 'y\n' }),
    ]);
    expect(raced.map((r) => r.status).sort()).toEqual([200, 429]);
  });

  it('refuses the N+1-th concurrent turn of one tenant across replicas with 429 naming the limit; others are served', async () => {
    const { acme, rival } = await tenants();
    const a = await replica({ ENGRAM_SERVE_MAX_TURNS_PER_TENANT: '2' });
    const b = await replica({ ENGRAM_SERVE_MAX_TURNS_PER_TENANT: '2' });
    const model_ = holdingModel();
    const ws = acme.tenant.workspace;
    const [s1, s2, s3] = [
      await openSession(a.url, acme.key, ws),
      await openSession(b.url, acme.key, ws),
      await openSession(a.url, acme.key, ws),
    ];
    const turn = (url: string, key: string, id: string, prompt: string) =>
      call(url, `/v1/sessions/${id}/turns`, { key, body: { prompt } });
    // Two turns of acme, one on each replica, held in the model's reply.
    const t1 = turn(a.url, acme.key, s1, 'hold me');
    const t2 = turn(b.url, acme.key, s2, 'hold me');
    await waitUntil(() => model_.held === 2, 'both turns in the model');
    // The third, on either replica: 429 with the limit, the setting and Retry-After.
    const third = await fetch(`${a.url}/v1/sessions/${s3}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'one more' }),
    });
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    expect(await third.json()).toMatchObject({
      error: { code: 'TENANT_TURN_LIMIT', limit: 2, setting: 'ENGRAM_SERVE_MAX_TURNS_PER_TENANT' },
    });
    // Positive control: another tenant under its own limit is served meanwhile, on the same replica.
    const rivalSession = await openSession(b.url, rival.key, rival.tenant.workspace);
    const rivalTurn = await turn(b.url, rival.key, rivalSession, 'hello');
    expect(rivalTurn.status).toBe(200);
    model_.release();
    expect((await t1).status).toBe(200);
    expect((await t2).status).toBe(200);
    // The slots are given back when the turns end: acme's third turn now runs.
    const later = await turn(a.url, acme.key, s3, 'one more');
    expect(later.status).toBe(200);
    expect(later.body.answer).toBe('Done.');
  });

  it("a revocation stops a running turn at its next step; another tenant's running turn completes", async () => {
    const { store, acme, rival } = await tenants();
    const { url } = await replica();
    const model_ = holdingModel();
    const s = await openSession(url, acme.key, acme.tenant.workspace);
    const r = await openSession(url, rival.key, rival.tenant.workspace);
    const acmeTurn = call(url, `/v1/sessions/${s}/turns`, { key: acme.key, body: { prompt: 'hold me' } });
    const rivalTurn = call(url, `/v1/sessions/${r}/turns`, { key: rival.key, body: { prompt: 'hold me' } });
    await waitUntil(() => model_.held === 2, 'both turns in the model');
    await store.revoke('acme');
    model_.release();
    const stopped = await acmeTurn;
    expect(stopped.status).toBe(403);
    expect(stopped.body.error.code).toBe('TENANT_REVOKED');
    // Positive control: the same reply, for a tenant still active, finishes the turn.
    const done = await rivalTurn;
    expect(done.status).toBe(200);
    expect(done.body.answer).toBe('Held answer, in several words.');
    // Nothing of the reply after the revocation was written to acme's transcript.
    const transcripts = join(acme.tenant.home, 'projects');
    const all = spawnSync('grep', ['-rl', 'Held answer', transcripts], { encoding: 'utf8' });
    expect(all.stdout).toBe('');
    expect(spawnSync('grep', ['-rl', 'Held answer', join(rival.tenant.home, 'projects')]).status).toBe(0);
  });
});

describe('engram serve: streaming and sessions across replicas', () => {
  it('streams a turn as Server-Sent Events to the end', async () => {
    const { acme } = await tenants();
    writeFileSync(join(acme.tenant.workspace, 'README.md'), 'hello readme');
    const { url } = await replica();
    main = (r) =>
      JSON.stringify(r.body.messages).includes('tool_result')
        ? textReply('The readme says hello.')
        : reply(
            text('Let me look.'),
            toolUse('Read', { file_path: join(acme.tenant.workspace, 'README.md') }, 'r1'),
          );
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } });
    const events = await readSse(url, `/v1/sessions/${session.body.id}/turns`, acme.key, {
      prompt: 'what does the readme say?',
    });
    // Each short text block arrives as one delta while it streams, then as the complete block.
    expect(events.map((e) => e.event)).toEqual([
      'turn.started',
      'text_delta',
      'text',
      'tool_use',
      'tool_result',
      'text_delta',
      'text',
      'recall',
      'memory',
      'done',
    ]);
    expect(events[1]!.data).toEqual({ turn: 0, index: 0, text: 'Let me look.' });
    expect(events[3]!.data).toMatchObject({ id: 'r1', name: 'Read' });
    expect(events[4]!.data).toMatchObject({ toolUseId: 'r1', isError: false });
    expect(events[4]!.data.content).toContain('hello readme');
    expect(events[5]!.data).toEqual({ turn: 1, index: 0, text: 'The readme says hello.' });
    expect(events.at(-1)!.data).toMatchObject({ answer: 'The readme says hello.', endReason: 'completed' });
    expect(events.at(-1)!.data.usage.outputTokens).toBeGreaterThan(0);
  });

  it('streams text deltas while a block is still open; the JSON answer and the transcript are as before', async () => {
    const { acme } = await tenants();
    const { url } = await replica();
    const long = 'Streaming answers arrive piece by piece, several deltas for this one text block.';
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    // The model holds the block open after two deltas until this test has seen them arrive.
    main = () => ({ ...textReply(long), pauseStream: { afterTextDeltas: 2, until: gate } });
    const session = await call(url, '/v1/sessions', { key: acme.key, body: { cwd: acme.tenant.workspace } });
    const res = await fetch(`${url}/v1/sessions/${session.body.id}/turns`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${acme.key}`,
        'content-type': 'application/json',
        accept: 'text/event-stream',
      },
      body: JSON.stringify({ prompt: 'tell me' }),
    });
    const events: Array<{ event: string; data: { text?: string } }> = [];
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    let seenBeforeRelease: string[] | undefined;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += value;
      let cut = buffered.indexOf('\n\n');
      while (cut >= 0) {
        const block = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 2);
        cut = buffered.indexOf('\n\n');
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event) events.push({ event, data: data ? JSON.parse(data) : {} });
      }
      if (!seenBeforeRelease && events.filter((e) => e.event === 'text_delta').length >= 2) {
        seenBeforeRelease = events.map((e) => e.event);
        release();
      }
    }
    // Two deltas reached the client while the model still held the block open (no `text` event yet).
    expect(seenBeforeRelease).toEqual(['turn.started', 'text_delta', 'text_delta']);
    const deltas = events.filter((e) => e.event === 'text_delta');
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.map((e) => e.data.text).join('')).toBe(long);
    expect(events.filter((e) => e.event === 'text').map((e) => e.data.text)).toEqual([long]);

    // Without SSE: one JSON answer, no deltas in its events; the transcript records the block whole.
    main = () => textReply(long);
    const json = await call(url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'again' },
    });
    expect(json.status).toBe(200);
    expect(json.body.answer).toBe(long);
    expect(json.body.events.map((e: { event: string }) => e.event)).toEqual([
      'turn.started',
      'text',
      'recall',
      'memory',
    ]);
    const paths = await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: acme.tenant.workspace });
    const assistantTexts = readFileSync(paths.transcriptPath(session.body.id), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === 'assistant')
      .flatMap((e) => e.message.content.filter((b: { type: string }) => b.type === 'text'))
      .map((b: { text: string }) => b.text);
    expect(assistantTexts).toEqual([long, long]);
  });

  it('runs one turn of a session at a time across two replicas: the other gets 409, or waits when asked', async () => {
    const { acme } = await tenants();
    const [a, b] = [await replica(), await replica()];
    main = (r) => textReply(`slow answer to ${lastUser(r).slice(0, 20)}`, { latencyMs: 600 });
    const session = await call(a.url, '/v1/sessions', {
      key: acme.key,
      body: { cwd: acme.tenant.workspace },
    });
    const turns = `/v1/sessions/${session.body.id}/turns`;
    const first = call(a.url, turns, { key: acme.key, body: { prompt: 'first' } });
    await new Promise((r) => setTimeout(r, 150));
    const second = await call(b.url, turns, { key: acme.key, body: { prompt: 'second' } });
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('SESSION_BUSY');
    const waited = call(b.url, turns, {
      key: acme.key,
      body: { prompt: 'third' },
      headers: { prefer: 'wait=20' },
    });
    expect((await first).status).toBe(200);
    expect((await waited).status).toBe(200);
    expect((await call(a.url, '/metrics')).body).toContain('engram_session_conflicts_total 0');
    expect((await call(b.url, '/metrics')).body).toContain('engram_session_conflicts_total 1');
    const paths = await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: acme.tenant.workspace });
    const entries = readFileSync(paths.transcriptPath(session.body.id), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const prompts = entries.filter((e) => e.type === 'user').map((e) => textOf(e.message.content));
    expect(prompts).toEqual(['first', 'third']);
    const { live } = buildChain(entries);
    expect(live).toHaveLength(entries.length);
  });

  it('lets another replica serve the next turn after a replica is killed mid-turn; the transcript stays one chain', {
    timeout: 60_000,
  }, async () => {
    const { acme } = await tenants();
    const entry = fileURLToPath(new URL('../bin/engram.ts', import.meta.url));
    const child = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', entry, 'serve', '--port', '0'],
      {
        env: env() as NodeJS.ProcessEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    closer.defer(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const childUrl = await new Promise<string>((resolve, reject) => {
      let err = '';
      child.stderr.on('data', (c: Buffer) => {
        err += c.toString();
        const m = /listening on (http:\/\/\S+)/.exec(err);
        if (m) resolve(m[1]!);
      });
      child.on('exit', () => reject(new Error(`replica exited: ${err}`)));
      setTimeout(() => reject(new Error(`replica did not start: ${err}`)), 30_000);
    });
    let stalled = false;
    main = (r) => {
      if (lastUser(r).includes('hang') && !lastUser(r).includes('after the crash')) {
        stalled = true;
        return textReply('never delivered', { latencyMs: 20_000 });
      }
      return textReply('served by the survivor');
    };
    const session = await call(childUrl, '/v1/sessions', {
      key: acme.key,
      body: { cwd: acme.tenant.workspace },
    });
    const hanging = call(childUrl, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'hang here' },
    }).catch(() => undefined);
    for (let i = 0; i < 200 && !stalled; i++) await new Promise((r) => setTimeout(r, 25));
    expect(stalled).toBe(true);
    const survivor = await replica();
    const busy = await call(survivor.url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'too soon' },
    });
    expect(busy.status).toBe(409);
    child.kill('SIGKILL');
    await hanging;
    const next = await call(survivor.url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'after the crash', wait: 10 },
    });
    expect(next.status).toBe(200);
    expect(next.body.answer).toBe('served by the survivor');
    const paths = await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: acme.tenant.workspace });
    const entries = readFileSync(paths.transcriptPath(session.body.id), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const { live } = buildChain(entries);
    // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
    expect(live.map((e: any) => e.uuid)).toEqual(entries.map((e) => e.uuid));
    expect(entries.filter((e) => e.type === 'user').map((e) => textOf(e.message.content))).toEqual([
      'hang here',
      'after the crash',
    ]);
  });

  it('drains on stop: in-flight turns finish, the replica turns unready, and new turns are refused', async () => {
    const { acme } = await tenants();
    const a = await replica();
    main = () => textReply('finished while draining', { latencyMs: 400 });
    const session = await call(a.url, '/v1/sessions', {
      key: acme.key,
      body: { cwd: acme.tenant.workspace },
    });
    const inflight = call(a.url, `/v1/sessions/${session.body.id}/turns`, {
      key: acme.key,
      body: { prompt: 'go' },
    });
    await new Promise((r) => setTimeout(r, 150));
    const stopping = a.stop();
    const ready = await a.hosted.app.request('/readyz');
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ ready: false, reason: 'draining' });
    const refused = await a.hosted.app.request(`/v1/sessions/${session.body.id}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'too late' }),
    });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('DRAINING');
    const result = await inflight;
    expect(result.status).toBe(200);
    expect(result.body.answer).toBe('finished while draining');
    expect(await stopping).toEqual({ finished: 1, aborted: 0 });
    servers.splice(servers.indexOf(a), 1);
    // The lease was released: another replica serves the session at once.
    const b = await replica();
    expect(
      (
        await call(b.url, `/v1/sessions/${session.body.id}/turns`, {
          key: acme.key,
          body: { prompt: 'again' },
        })
      ).status,
    ).toBe(200);
  });
});
