import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import { JobProducer } from '@engram/queue/producer';
import { TenantTeamStores } from '@engram/tenants/team-stores';
import { TenantStore } from '@engram/tenants/tenant-store';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningServer, startServer } from '../commands/serve.js';
import { tenantsCommand } from '../commands/tenants.js';
import { loadAgentConfig } from '../config.js';

// Per-tenant memory-store bindings: two hosted tenants whose projects name the same repository, each bound (by
// the operator's `engram tenants stores`) to its own store, sync on one worker service against a real `engram
// serve` (Memory Stores API on PostgreSQL) through the SDK: each store receives only its own tenant's files,
// and each team directory only its own store's. A binding to another tenant's store is refused when it is set.

let base: string;
let engramHome: string;
let server: RunningServer;
const keys: Record<string, string> = {};
const closer = new Closer();
const namespace = uniquePrefix('tstores');

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'engram-tenant-stores-'));
  engramHome = join(base, 'home');
  const tenants = new TenantStore(engramHome);
  for (const t of ['alpha', 'beta', 'gamma']) {
    mkdirSync(join(base, `ws-${t}`), { recursive: true });
    keys[t] = (await tenants.add(t, join(base, `ws-${t}`))).key;
  }
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `ts_${randomBytes(5).toString('hex')}`,
  };
  server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
}, 120_000);

afterAll(async () => {
  await closer.closeAll();
  await server?.stop();
  rmSync(base, { recursive: true, force: true });
});

const sdk = (tenant: string) => new Anthropic({ baseURL: server.url, apiKey: keys[tenant]!, maxRetries: 0 });

async function storeFiles(tenant: string, storeId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const m of sdk(tenant).beta.memoryStores.memories.list(storeId, { view: 'full', limit: 20 }))
    if (m.type === 'memory') out[m.path] = m.content ?? '';
  return out;
}

/** `engram tenants stores …` as the operator runs it, against this deployment's serve. */
async function operator(args: string[]) {
  const config = loadAgentConfig({
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ANTHROPIC_API_KEY: 'test',
    ENGRAM_TEAM_SYNC_URL: server.url,
  });
  const out: string[] = [];
  const err: string[] = [];
  const [name, ...change] = args;
  const code = await tenantsCommand(
    config,
    { kind: 'stores', name: name!, args: change, json: false },
    { out: (t) => out.push(t), err: (t) => err.push(t) },
  );
  return { code, out, err };
}

// Every tenant has a project at the same path string whose origin names the same repository.
const PD = '-srv-widgets';
const teamDirOf = (tenant: string) =>
  engramPathsFromDirNames({
    engramHome: join(engramHome, 'tenants', tenant, 'home'),
    projectDirName: PD,
    transcriptDirName: PD,
  }).teamDir;

describe('per-tenant memory-store bindings', () => {
  it('refuses a binding to another tenant’s store (or an unknown or archived one) when it is set', async () => {
    const { id: betaStore } = await sdk('beta').beta.memoryStores.create({ name: 'beta only' });
    const foreign = await operator(['alpha', 'set', `acme/widgets=${betaStore}`]);
    expect(foreign.code).toBe(2);
    expect(foreign.err.join('\n')).toMatch(
      new RegExp(`${betaStore} is not a memory store of tenant alpha: the store service answered 404`),
    );
    expect(await new TenantTeamStores(new TenantStore(engramHome)).get('alpha')).toEqual({});
    expect((await operator(['alpha', 'set', 'acme/widgets=memstore_doesnotexist'])).code).toBe(2);
    const { id: archived } = await sdk('alpha').beta.memoryStores.create({ name: 'old' });
    await sdk('alpha').beta.memoryStores.archive(archived);
    const old = await operator(['alpha', 'set', `acme/widgets=${archived}`]);
    expect(old.err.join('\n')).toMatch(/is archived/);
    expect(await new TenantTeamStores(new TenantStore(engramHome)).get('alpha')).toEqual({});
    // Positive control: the same command with the tenant's own live store.
    const { id: alphaStore } = await sdk('alpha').beta.memoryStores.create({ name: 'alpha widgets' });
    const own = await operator(['alpha', 'set', `Acme/Widgets=${alphaStore}`]);
    expect(own.code).toBe(0);
    expect(own.out[0]).toMatch(new RegExp(`^acme/widgets\\t${alphaStore}\\t`));
    expect((await operator(['alpha'])).out).toEqual([own.out[0]]);
    expect((await operator(['alpha', 'unset', 'acme/widgets'])).out).toEqual([
      'Tenant alpha has no memory-store bindings: its team memory syncs with the team-memory protocol.',
    ]);
  });

  it('two tenants bound to their own stores for one repository name sync on one worker service, each into its own store only', async () => {
    const { id: alphaStore } = await sdk('alpha').beta.memoryStores.create({ name: 'alpha widgets' });
    await sdk('alpha').beta.memoryStores.memories.create(alphaStore, {
      path: '/seed-alpha.md',
      content: 'alpha store seed\n',
    });
    const { id: betaStore } = await sdk('beta').beta.memoryStores.create({ name: 'beta widgets' });
    await sdk('beta').beta.memoryStores.memories.create(betaStore, {
      path: '/seed-beta.md',
      content: 'beta store seed\n',
    });
    expect((await operator(['alpha', 'set', `acme/widgets=${alphaStore}`])).code).toBe(0);
    expect((await operator(['beta', 'set', `*=${betaStore}`])).code).toBe(0);
    // `create`: a new store of the tenant, named for the repository, bound at once.
    const created = await operator(['beta', 'create', 'beta/tools']);
    expect(created.code).toBe(0);
    const createdId = /beta\/tools\t(memstore_\w+)/.exec(created.out.join('\n'))?.[1];
    expect((await sdk('beta').beta.memoryStores.retrieve(createdId!)).name).toBe('team memory beta/tools');
    await expect(sdk('alpha').beta.memoryStores.retrieve(createdId!)).rejects.toBeInstanceOf(
      Anthropic.NotFoundError,
    );

    for (const t of ['alpha', 'beta', 'gamma']) {
      mkdirSync(teamDirOf(t), { recursive: true });
      writeFileSync(join(teamDirOf(t), `${t}-note.md`), `${t} team note\n`);
    }
    // One worker service for every tenant: it knows the service, holds no key, and has a deployment binding
    // (for jobs without a tenant) that names the same repository — alpha's store, which it never uses for beta.
    const service = await startTestWorkerService({
      modelUrl: 'http://127.0.0.1:9',
      engramHome,
      namespace,
      queues: 'team-sync',
      closer,
      env: { ENGRAM_TEAM_SYNC_URL: server.url, ENGRAM_TEAM_MEMORY_STORE: `acme/widgets=${alphaStore}` },
    });
    const producer = closer.add(new JobProducer(service.engine));
    const sync = async (tenant: string, repo = 'acme/widgets') => {
      const { jobId } = await producer.enqueue('team-sync', {
        tenant,
        projectDir: PD,
        transcriptDir: PD,
        repo,
        action: 'pull',
        reason: 'session-start',
        debounceMs: 0,
        requestedAt: new Date().toISOString(),
      });
      return waitForFinishedJob(producer.queue('team-sync'), jobId);
    };
    const [alpha, beta] = await Promise.all([sync('alpha'), sync('beta')]);
    expect(alpha.failedReason).toBeUndefined();
    expect(beta.failedReason).toBeUndefined();
    expect(alpha.returnvalue).toMatchObject({ protocol: 'memory-store', pushed: ['alpha-note.md'] });
    expect(beta.returnvalue).toMatchObject({ protocol: 'memory-store', pushed: ['beta-note.md'] });
    expect(await storeFiles('alpha', alphaStore)).toEqual({
      '/alpha-note.md': 'alpha team note\n',
      '/seed-alpha.md': 'alpha store seed\n',
    });
    expect(await storeFiles('beta', betaStore)).toEqual({
      '/beta-note.md': 'beta team note\n',
      '/seed-beta.md': 'beta store seed\n',
    });
    // And each team directory got its own store's memories only.
    expect(readFileSync(join(teamDirOf('alpha'), 'seed-alpha.md'), 'utf8')).toBe('alpha store seed\n');
    expect(existsSync(join(teamDirOf('alpha'), 'seed-beta.md'))).toBe(false);
    expect(readFileSync(join(teamDirOf('beta'), 'seed-beta.md'), 'utf8')).toBe('beta store seed\n');
    expect(existsSync(join(teamDirOf('beta'), 'seed-alpha.md'))).toBe(false);

    // A tenant with no binding of its own for a repository the deployment binds: a clear permanent failure,
    // not alpha's store and not a silent switch to the seed protocol; nothing of gamma's reaches a store.
    const gamma = await sync('gamma');
    expect(gamma.failedReason).toMatch(
      /TEAM_STORE_NOT_BOUND_FOR_TENANT: .*tenant gamma has no memory store bound/,
    );
    expect(gamma.attemptsMade).toBe(1);
    expect(Object.keys(await storeFiles('alpha', alphaStore))).not.toContain('/gamma-note.md');
    // Positive control: gamma's repository nobody binds syncs with the seed protocol on the same service.
    const seed = await sync('gamma', 'gamma/own');
    expect(seed.failedReason).toBeUndefined();
    expect(seed.returnvalue).toMatchObject({ action: 'pull' });
    expect((seed.returnvalue as { protocol?: string }).protocol).toBeUndefined();
  });
});
