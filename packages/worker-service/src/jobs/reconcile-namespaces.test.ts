import { readExtractedMark, writeSessionRecord } from '@engram/memory-core/extraction/session-record';
import { JobProducer } from '@engram/queue/producer';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { textReply } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';
import { readReconcileRun } from '../operations.js';
import { createForeground, isExtractionRequest } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';

// A session is extracted once, whichever worker service finished the job: `engram demo` runs its own stack in
// its own namespace on the same ENGRAM_HOME, and the dev stack's sweep used to find no cursor in its namespace
// and extract the demo's sessions again. On a real Redis with real workers: namespace A extracts, namespace B's
// sweep over the same home enqueues nothing; the positive control is the same session growing, which B's sweep
// does extract (from where A's job stopped).

const scripted = useModelServer();
const { closer } = scripted;

describe('reconcile across namespaces', () => {
  it("never re-extracts what another namespace's finished job covered, and still extracts what is new", async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [
      textReply('Sure.'),
      textReply('Ok.'),
    ]);
    scripted.server.route('fork', (r) => isExtractionRequest(r.body), [
      textReply('Nothing to save.'),
      textReply('Nothing to save.'),
    ]);
    const extractions = () =>
      scripted.server.messageRequests().filter((r) => isExtractionRequest(r.body)).length;
    const leaf = await fg.turn('hello there friend');
    const payload = fg.extractPayload(leaf);
    await writeSessionRecord(fg.paths.sessionDir(fg.sessionId), {
      version: 1,
      sessionId: fg.sessionId,
      projectDir: payload.projectDir,
      transcriptDir: payload.transcriptDir,
    });

    const a = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: fg.engramHome,
      queues: 'extract',
      closer,
      namespace: uniquePrefix('recA'),
    });
    const producerA = closer.add(new JobProducer(a.engine));
    const receipt = await producerA.enqueue('extract', payload);
    await waitUntil(
      async () => (await producerA.queue('extract').getJob(receipt.jobId))?.finishedOn !== undefined,
      'extraction in namespace A',
    );
    expect(extractions()).toBe(1);
    expect(await readExtractedMark(fg.paths.sessionDir(fg.sessionId))).toEqual({
      version: 1,
      leafUuid: leaf.leafUuid,
      leafSeq: leaf.leafSeq,
    });
    await a.stop('test');

    const b = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: fg.engramHome,
      queues: 'extract,reconcile',
      closer,
      namespace: uniquePrefix('recB'),
      env: { ENGRAM_RECONCILE_INTERVAL_MS: '300', ENGRAM_RECONCILE_QUIET_MS: '0' },
    });
    await waitUntil(async () => (await readReconcileRun(b.engine.state)) !== undefined, 'a sweep', {
      timeoutMs: 20_000,
    });
    const sweptAt = (await readReconcileRun(b.engine.state))?.finishedAtMs ?? 0;
    // Two sweeps, so a covered session seen once is not just waiting for the next one.
    await waitUntil(
      async () => ((await readReconcileRun(b.engine.state))?.finishedAtMs ?? 0) > sweptAt,
      'a second sweep',
      { timeoutMs: 20_000 },
    );
    const run = await readReconcileRun(b.engine.state);
    expect(run?.result?.sessions).toBe(1);
    expect(run?.result?.extractsEnqueued).toBe(0);
    expect(extractions()).toBe(1);

    // Positive control: a new turn in the same session is extracted by B's sweep.
    const next = await fg.turn('and one more thing');
    await waitUntil(() => extractions() === 2, "B's sweep extracts the new turn", { timeoutMs: 30_000 });
    await waitUntil(
      async () => (await readExtractedMark(fg.paths.sessionDir(fg.sessionId)))?.leafSeq === next.leafSeq,
      'the mark reaches the new leaf',
    );
  }, 90_000);
});
