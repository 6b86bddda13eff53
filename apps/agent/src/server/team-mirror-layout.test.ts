import { createHash, randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { MARKER_PATH } from '@anthropic-ai/sdk/tools/agent-toolset/memories';
import { walkSync } from '@engram/fs-walk/walk';
import { formatMemoryManifest, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { lexicalRank } from '@engram/memory-core/recall/lexical';
import { readMemoriesForSurfacing } from '@engram/memory-core/recall/read-for-surfacing';
import { TeamMemoryHttpClient } from '@engram/team-memory/client/http-client';
import { CLAUDE_CODE_MANIFEST, SDK_STORE_MARKER } from '@engram/team-memory/client/local-files';
import { memoryStoreClient, StoreSyncStateFile, syncTeamStore } from '@engram/team-memory/client/store-sync';
import { pullTeamMemory, pushTeamMemory } from '@engram/team-memory/client/sync';
import { TeamSyncStateFile } from '@engram/team-memory/client/sync-state';
import { TenantStore } from '@engram/tenants/tenant-store';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningServer, startServer } from '../commands/serve.js';
import { loadAgentConfig } from '../config.js';

// Another client's store mirror inside team/: the fixtures reproduce byte for byte what Claude Code 2.1.328
// writes in `memory/team/<mount>/` (its `.memory-sync` manifest and `.memory-sync-basis`, a temp file and a
// manifest stage left by an interrupted write, a file it does not recognise) and what the SDK's
// SessionMemoryStores writes (its `.anthropic-memory-store` marker, a `.fs-<hex>.tmp` leftover); the names and
// formats are recorded in docs/memory-stores.md "Claude Code's on-disk layout". Engram reads their memories
// like any file and changes nothing in them: not the memory scan or recall, not store sync, not the seed sync.

const FIXTURES = fileURLToPath(new URL('./__fixtures__/', import.meta.url));
const CC_MOUNT = 'memstore_01JQ8ZKfixtureCodeMirror01';
const SDK_MOUNT = 'agent-notes';

let base: string;
let server: RunningServer;
let key: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'engram-mirror-layout-'));
  const engramHome = join(base, 'home');
  mkdirSync(join(base, 'ws'), { recursive: true });
  key = (await new TenantStore(engramHome).add('alpha', join(base, 'ws'))).key;
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: `ml${randomBytes(4).toString('hex')}`,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `ml_${randomBytes(5).toString('hex')}`,
  };
  server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(base, { recursive: true, force: true });
});

/** A memory directory whose team/ holds both mirrors (copied byte for byte) and one file of Engram's own. */
function memoryDirWithMirrors(name: string) {
  const memoryDir = join(base, name, 'memory');
  const teamDir = join(memoryDir, 'team');
  mkdirSync(teamDir, { recursive: true });
  cpSync(join(FIXTURES, 'claude-code-team-mirror'), teamDir, { recursive: true });
  cpSync(join(FIXTURES, 'sdk-session-mirror'), teamDir, { recursive: true });
  writeFileSync(join(teamDir, 'ours.md'), '---\nname: Ours\ndescription: an Engram team note\n---\nOurs.\n');
  return { memoryDir, teamDir };
}

/** Every file under the two mirrors: content hash and mtime (a rewrite with equal bytes still shows). */
function mirrorSnapshot(teamDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const mount of [CC_MOUNT, SDK_MOUNT])
    for (const f of walkSync(join(teamDir, mount), { hidden: true }).files) {
      const st = statSync(f.path);
      out[relative(teamDir, f.path).split(sep).join('/')] =
        `${createHash('sha256').update(readFileSync(f.path)).digest('hex')} ${st.mtimeMs} ${st.ino}`;
    }
  return out;
}

describe("Claude Code's and the SDK's store mirrors under team/", () => {
  it('the fixtures carry the recorded names: the manifest names its store, the marker is the SDK’s', () => {
    expect(SDK_STORE_MARKER).toBe(MARKER_PATH);
    const manifest = readFileSync(
      join(FIXTURES, 'claude-code-team-mirror', CC_MOUNT, CLAUDE_CODE_MANIFEST),
      'utf8',
    );
    expect(JSON.parse(manifest)).toEqual({ v: 1, partition: `/v1/memory_stores/${CC_MOUNT}` });
    const marker = readFileSync(join(FIXTURES, 'sdk-session-mirror', SDK_MOUNT, SDK_STORE_MARKER), 'utf8');
    expect(marker).toMatch(/^version 1\nmemstore_\w+$/);
  });

  it('the memory scan and recall read their memories and never their bookkeeping', async () => {
    const { memoryDir } = memoryDirWithMirrors('scan');
    const scan = await scanMemoryDir(memoryDir, { cache: false });
    expect(scan.headers.map((h) => h.filename).sort()).toEqual([
      `team/${SDK_MOUNT}/preferences.md`,
      `team/${CC_MOUNT}/notes/deploy.md`,
      'team/ours.md',
    ]);
    expect(scan.problems).toEqual([]);
    const manifest = formatMemoryManifest(scan.headers);
    for (const bookkeeping of ['.memory-sync', '.tmp.', '.stage', '.anthropic-memory-store', '.fs-'])
      expect(manifest).not.toContain(bookkeeping);
    // Recall (its lexical ranking and the read for injection) finds the mirrored runbook by what it says.
    const [best] = lexicalRank('how do we deploy the widgets service to region ams', scan.headers);
    expect(best?.header.filename).toBe(`team/${CC_MOUNT}/notes/deploy.md`);
    const read = await readMemoriesForSurfacing({ memoryDir, filenames: [best!.header.filename] });
    expect(read.memories[0]?.content).toContain('make ship');
    expect(read.dropped).toEqual([]);
  });

  it('store sync uploads none of them, writes nothing into them, and leaves every byte and mtime as found', async () => {
    const { teamDir } = memoryDirWithMirrors('store');
    const before = mirrorSnapshot(teamDir);
    const client = new Anthropic({ baseURL: server.url, apiKey: key, maxRetries: 0 });
    const { id: storeId } = await client.beta.memoryStores.create({ name: 'engram team' });
    const target = {
      teamDir,
      storeId,
      client: memoryStoreClient({ baseUrl: server.url, apiKey: key, maxRetries: 0 }),
      state: new StoreSyncStateFile(join(base, 'store', 'team-store-sync.json')),
    };
    const first = await syncTeamStore(target);
    expect(first.uploaded.map((u) => u.key)).toEqual(['ours.md']);
    expect(first.skipped).toEqual([]);
    expect(first.foreignMounts).toEqual([
      { dir: SDK_MOUNT, client: 'sdk' },
      { dir: CC_MOUNT, client: 'claude-code' },
    ]);
    // Another client writes at a path inside a mirror: Engram does not pull it into the mirror.
    await client.beta.memoryStores.memories.create(storeId, {
      path: `/${CC_MOUNT}/notes/deploy.md`,
      content: 'planted\n',
    });
    const second = await syncTeamStore(target);
    expect(second.skipped).toEqual([{ key: `${CC_MOUNT}/notes/deploy.md`, reason: 'foreign-mount' }]);
    expect(second.downloaded).toEqual([]);
    const stored: string[] = [];
    for await (const m of client.beta.memoryStores.memories.list(storeId)) stored.push(m.path);
    expect(stored.sort()).toEqual([`/${CC_MOUNT}/notes/deploy.md`, '/ours.md']);
    expect(mirrorSnapshot(teamDir)).toEqual(before);
  });

  it('the seed team sync pushes none of them and pulls nothing into them', async () => {
    const { teamDir } = memoryDirWithMirrors('seed');
    const before = mirrorSnapshot(teamDir);
    const http = new TeamMemoryHttpClient({ baseUrl: server.url, apiKey: key, maxRetries: 0 });
    const target = {
      teamDir,
      repo: 'acme/mirrors',
      http,
      state: new TeamSyncStateFile(join(base, 'seed', 'team-sync.json')),
    };
    const push = await pushTeamMemory(target);
    expect(push.pushed.map((p) => p.key)).toEqual(['ours.md']);
    expect(push.skipped).toEqual([]);
    // Another client puts entries inside the mirrors' paths on the service: a pull skips them.
    await http.put(
      'acme/mirrors',
      {
        [`${CC_MOUNT}/notes/deploy.md`]: 'planted\n',
        [`${SDK_MOUNT}/preferences.md`]: 'planted\n',
      },
      '*',
    );
    const pull = await pullTeamMemory(target, { skipEtagCache: true });
    expect(pull.written).toEqual([]);
    expect(pull.skipped.map((s) => [s.key, s.reason])).toEqual([
      [`${SDK_MOUNT}/preferences.md`, 'foreign-mount'],
      [`${CC_MOUNT}/notes/deploy.md`, 'foreign-mount'],
    ]);
    expect(mirrorSnapshot(teamDir)).toEqual(before);
  });
});
