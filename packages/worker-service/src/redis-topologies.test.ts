import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveBackendConfig } from '@engram/queue/backend-config';
import { createQueueEngine } from '@engram/queue/engine';
import { JobProducer } from '@engram/queue/producer';
import { holdLeaseInTurn } from '@engram/queue/state/held-lease';
import { acquireSessionLease, SessionBusyError } from '@engram/queue/state/session-lease';
import { tenantKey } from '@engram/queue/state/tenant-scope';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import {
  type RunningRedisTopology,
  startRedisCluster,
  startRedisSentinel,
  startTlsRedis,
} from '@engram/testkit/redis-topologies';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForeground, isExtractionRequest, lastUserText } from './testing/foreground.test-helpers.js';
import { startTestWorkerService } from './testing/service.test-helpers.js';

// Extraction end to end beyond one plaintext Redis node: a real 3-primary Redis Cluster on loopback (every
// multi-key script must keep its keys in one slot), a TLS-only Redis with a self-signed certificate, and a
// Sentinel-managed primary (primary + replica + 3 sentinels), through a real failover.

const MEMORY =
  '---\nname: Ports\ndescription: The API listens on 7443 in staging\ntype: project\n---\nStaging API: 7443.\n';
const DEPLOYS =
  '---\nname: Deploys\ndescription: Deploys go through the blue/green script\ntype: project\n---\nUse deploy.sh.\n';

let model: ModelServer;
beforeAll(async () => {
  model = await startModelServer();
  model.respond((r) => {
    if (!isExtractionRequest(r.body)) return textReply('Noted.');
    const instruction = lastUserText(r.body);
    if (!instruction.includes('You are now the memory extraction subagent')) return textReply('Saved.');
    const memoryDir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
    // A later extraction (after a failover) sees the newer fact and writes its own file.
    if (JSON.stringify(r.body.messages).includes('blue/green')) {
      return reply(
        text('Saving.'),
        toolUse('Write', { file_path: `${memoryDir}/project_deploys.md`, content: DEPLOYS }),
      );
    }
    return reply(
      text('Saving.'),
      toolUse('Write', { file_path: `${memoryDir}/project_ports.md`, content: MEMORY }),
    );
  });
});
afterAll(() => model.close());

const topologies: Array<[string, () => Promise<RunningRedisTopology>]> = [
  ['a 3-node Redis Cluster', () => startRedisCluster(3)],
  ['TLS (rediss://, self-signed certificate)', () => startTlsRedis()],
  ['Redis Sentinel (primary + replica + 3 sentinels)', () => startRedisSentinel()],
];

describe.each(topologies)('extraction on %s', (_name, start) => {
  it('extracts a memory end to end, and session leases hold', { timeout: 90_000 }, async () => {
    const closer = new Closer();
    const topology = await start();
    closer.defer(() => topology.stop());
    try {
      const engramHome = mkdtempSync(join(tmpdir(), 'engram-topology-'));
      const namespace = uniquePrefix('topo');
      const service = await startTestWorkerService({
        modelUrl: model.url,
        engramHome,
        namespace,
        queues: 'extract',
        closer,
        backendEnv: topology.env,
      });
      const config = resolveBackendConfig(topology.env);
      const producerEngine = closer.add(createQueueEngine({ config, profile: 'producer', namespace }));
      await producerEngine.state.ready();
      const producer = new JobProducer(producerEngine);
      closer.defer(() => producer.close());

      const session = createForeground(model, { engramHome });
      const leaf = await session.turn('Staging API listens on 7443, remember that.');
      const receipt = await producer.enqueue('extract', session.extractPayload(leaf));
      const file = join(session.paths.memoryDir, 'project_ports.md');
      for (let i = 0; i < 300 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 50));
      if (!existsSync(file)) {
        const job = await producer.queue('extract').getJob(receipt.jobId);
        throw new Error(
          `no memory; job ${receipt.jobId}: ${job ? await job.getState() : 'missing'} ${job?.failedReason ?? ''} ${JSON.stringify(job?.returnvalue)} ${model.messageRequests().length}`,
        );
      }
      // The job finishes by keeping Claude Code's metadata on the file it wrote; the fork's text stays as written.
      const job = await producer.queue('extract').getJob(receipt.jobId);
      for (let i = 0; i < 300 && (await job?.getState()) !== 'completed'; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const saved = readFileSync(file, 'utf8');
      expect(saved.replace(/metadata:\n(?: {2}.*\n)+/, '')).toBe(MEMORY);
      expect(saved).toContain(`originSessionId: ${session.extractPayload(leaf).sessionId}`);

      // The lease script touches two keys (lease + fence): on a Cluster they must share a slot.
      const scope = { tenant: 'acme', sessionId: session.sessionId };
      const lease = await acquireSessionLease(producerEngine.state, scope, { ttlMs: 5_000 });
      await expect(acquireSessionLease(service.engine.state, scope, { ttlMs: 5_000 })).rejects.toBeInstanceOf(
        SessionBusyError,
      );
      await lease.assertHeld();
      await lease.release();
      // A tenant-scoped FIFO writer lease (three keys in one script: lease, fence, waiters), handed over.
      const writerKey = tenantKey('acme', 'project-writer:-srv-app');
      const options = { ttlMs: 5_000, reserveMs: 2_000, waiterTtlMs: 10_000 };
      const first = await holdLeaseInTurn(producerEngine.state, writerKey, {
        ...options,
        holder: 'extract:1',
      });
      expect(first.held).toBeDefined();
      const second = await holdLeaseInTurn(service.engine.state, writerKey, {
        ...options,
        holder: 'dream:2',
      });
      expect(second).toMatchObject({ position: 0, holder: 'extract:1' });
      expect(await first.held!.release()).toEqual({ next: 'dream:2' });
      const taken = await holdLeaseInTurn(service.engine.state, writerKey, { ...options, holder: 'dream:2' });
      expect(taken.held).toBeDefined();
      await taken.held!.release();
      if (config.kind === 'redis' && config.topology?.mode === 'cluster') {
        expect(producerEngine.namespace).toBe(`{${namespace}}`);
      }
    } finally {
      await closer.closeAll();
    }
  });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, tries = 600): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('extraction through a Sentinel failover', () => {
  it('keeps extracting from the cursor after the sentinels promote the replica', {
    timeout: 120_000,
  }, async () => {
    const closer = new Closer();
    const topology = await startRedisSentinel();
    closer.defer(() => topology.stop());
    try {
      const engramHome = mkdtempSync(join(tmpdir(), 'engram-sentinel-'));
      const namespace = uniquePrefix('sentinel');
      const service = await startTestWorkerService({
        modelUrl: model.url,
        engramHome,
        namespace,
        queues: 'extract',
        closer,
        backendEnv: topology.env,
      });
      const config = resolveBackendConfig(topology.env);
      expect(config).toMatchObject({ kind: 'redis', topology: { mode: 'sentinel', name: topology.name } });
      const producerEngine = closer.add(createQueueEngine({ config, profile: 'producer', namespace }));
      await producerEngine.state.ready();
      const producer = new JobProducer(producerEngine);
      closer.defer(() => producer.close());
      const session = createForeground(model, { engramHome });
      const completed = async (jobId: string) =>
        until(`job ${jobId}`, async () => {
          // State first, then the job: a job read before it completed carries no return value yet.
          const queue = producer.queue('extract');
          if ((await queue.getJobState(jobId)) !== 'completed') return undefined;
          return queue.getJob(jobId);
        });

      const first = await producer.enqueue(
        'extract',
        session.extractPayload(await session.turn('Staging API listens on 7443, remember that.')),
      );
      const firstJob = await completed(first.jobId);
      expect(existsSync(join(session.paths.memoryDir, 'project_ports.md'))).toBe(true);
      const firstTo = (firstJob.returnvalue as { toSeq: number }).toSeq;
      expect(firstTo).toBeGreaterThan(0);

      const { from, to } = await topology.failover();
      expect(topology.primaryPort()).toBe(to);
      expect(to).not.toBe(from);

      // The producer and the workers find the new primary through the sentinels; an enqueue made while
      // they reconnect fails fast (the foreground's outbox covers it), so retry until it is accepted.
      const leaf = await session.turn('Deploys go through the blue/green script, remember that too.');
      const second = await until('an enqueue after the failover', () =>
        producer.enqueue('extract', session.extractPayload(leaf)),
      );
      const secondJob = await completed(second.jobId);
      const deploys = readFileSync(join(session.paths.memoryDir, 'project_deploys.md'), 'utf8');
      expect(deploys.replace(/metadata:\n(?: {2}.*\n)+/, '')).toBe(DEPLOYS);
      // The cursor written before the failover was on the promoted replica: the extraction went on from it.
      expect(secondJob.returnvalue).toMatchObject({ outcome: 'extracted', fromSeq: firstTo });

      const scope = { tenant: 'acme', sessionId: session.sessionId };
      const lease = await acquireSessionLease(producerEngine.state, scope, { ttlMs: 5_000 });
      await expect(acquireSessionLease(service.engine.state, scope, { ttlMs: 5_000 })).rejects.toBeInstanceOf(
        SessionBusyError,
      );
      await lease.release();
    } finally {
      await closer.closeAll();
    }
  });
});
