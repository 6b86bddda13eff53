import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// No container engine runs on CI machines, so the compose file is checked by reading it.

const root = fileURLToPath(new URL('../../../../', import.meta.url));
// `merge: true` resolves the shared environment's `<<: *engram-env` merge keys as compose does.
const compose = parse(readFileSync(`${root}docker-compose.yml`, 'utf8'), { merge: true }) as {
  services: Record<string, Record<string, unknown>>;
  volumes: Record<string, unknown>;
};

function env(service: string): Record<string, string> {
  return compose.services[service]?.environment as Record<string, string>;
}

describe('docker-compose.yml', () => {
  it('runs Redis 7 with noeviction, append-only persistence and a healthcheck', () => {
    const redis = compose.services.redis!;
    expect(String(redis.image)).toMatch(/^redis:7(\.|-|$)/);
    const command = (redis.command as string[]).join(' ');
    expect(command).toContain('--maxmemory-policy noeviction');
    expect(command).toContain('--appendonly yes');
    expect(redis.healthcheck).toMatchObject({ test: expect.arrayContaining(['redis-cli', 'ping']) });
  });

  it('has workers and agent built from the multi-stage Dockerfile, waiting for a healthy Redis', () => {
    for (const name of ['workers', 'agent']) {
      const service = compose.services[name]!;
      expect(service.build).toMatchObject({ context: '.', target: 'runtime' });
      expect(service.depends_on).toMatchObject({ redis: { condition: 'service_healthy' } });
      expect(env(name).REDIS_URL).toBe('redis://redis:6379');
    }
  });

  it('builds both stages of the image on the Node major that CI tests', () => {
    const ci = readFileSync(`${root}.ci/run`, 'utf8');
    const tested = /^NODE_CI_VERSION=(\d+)\./m.exec(ci)?.[1];
    expect(tested).toBeDefined();
    const dockerfile = readFileSync(`${root}Dockerfile`, 'utf8');
    const stages = [...dockerfile.matchAll(/^FROM node:(\d+)-\S+ AS (\w+)$/gm)].map((m) => [m[1], m[2]]);
    expect(stages).toEqual([
      [tested, 'build'],
      [tested, 'runtime'],
    ]);
  });

  it('mounts one named volume at ENGRAM_HOME in both agent and workers', () => {
    const home = env('workers').ENGRAM_HOME;
    expect(home).toBeTruthy();
    expect(env('agent').ENGRAM_HOME).toBe(home);
    const mounts = (name: string) => compose.services[name]!.volumes as string[];
    const workerMount = mounts('workers').find((m) => m.endsWith(`:${home}`));
    const agentMount = mounts('agent').find((m) => m.endsWith(`:${home}`));
    expect(workerMount).toBeDefined();
    expect(agentMount).toBe(workerMount);
    const volumeName = workerMount!.split(':')[0]!;
    expect(Object.keys(compose.volumes)).toContain(volumeName);
  });

  it('points every container command at a file the workspace build produces', () => {
    const workers = (compose.services.workers!.command as string[]).join(' ');
    const agent = (compose.services.agent!.command as string[]).join(' ');
    expect(workers).toContain('apps/workers/dist/bin/engram-workers.js');
    expect(agent).toContain('apps/agent/dist/bin/engram.js');
  });

  it('runs PostgreSQL for the team memory store, healthy before the agent starts', () => {
    const postgres = compose.services.postgres!;
    expect(String(postgres.image)).toMatch(/^postgres:1[3-9]/);
    expect(postgres.healthcheck).toMatchObject({ test: expect.arrayContaining(['pg_isready']) });
    expect(compose.services.agent!.depends_on).toMatchObject({ postgres: { condition: 'service_healthy' } });
    expect(env('agent').ENGRAM_TEAM_MEMORY_DATABASE_URL).toMatch(
      /^postgres:\/\/engram:.*@postgres:5432\/engram$/,
    );
    expect(Object.keys(compose.volumes)).toContain('postgres-data');
  });
});
