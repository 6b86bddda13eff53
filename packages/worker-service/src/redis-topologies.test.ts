import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveBackendConfig } from '@engram/queue/backend-config';
import { createQueueEngine } from '@engram/queue/engine';
import { JobProducer } from '@engram/queue/producer';
import { acquireSessionLease, SessionBusyError } from '@engram/queue/state/session-lease';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import {
  type RunningRedisTopology,
  startRedisCluster,
  startTlsRedis,
} from '@engram/testkit/redis-topologies';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForeground, isExtractionRequest, lastUserText } from './testing/foreground.test-helpers.js';
import { startTestWorkerService } from './testing/service.test-helpers.js';

// Extraction end to end beyond one plaintext Redis node: a real 3-primary Redis Cluster on loopback (every
// multi-key script must keep its keys in one slot), and a TLS-only Redis with a self-signed certificate.

const MEMORY =
  '---\nname: Ports\ndescription: The API listens on 7443 in staging\ntype: project\n---\nStaging API: 7443.\n';

let model: ModelServer;
beforeAll(async () => {
  model = await startModelServer();
  model.respond((r) => {
    if (!isExtractionRequest(r.body)) return textReply('Noted.');
    const instruction = lastUserText(r.body);
    if (!instruction.includes('You are now the memory extraction subagent')) return textReply('Saved.');
    const memoryDir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
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
      if (config.kind === 'redis' && config.topology?.mode === 'cluster') {
        expect(producerEngine.namespace).toBe(`{${namespace}}`);
      }
    } finally {
      await closer.closeAll();
    }
  });
});
