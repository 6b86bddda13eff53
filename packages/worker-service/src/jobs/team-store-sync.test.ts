import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import type { TeamSyncResult } from '@engram/queue/jobs/team-sync';
import { JobProducer } from '@engram/queue/producer';
import { DELETE_CORROBORATION_MS, STORE_SYNC_STATE_FILENAME } from '@engram/team-memory/client/store-sync';
import {
  type MemoryStoresTestServer,
  startMemoryStoresTestServer,
} from '@engram/team-memory/testing/memory-stores.test-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createForeground, isExtractionRequest } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';

// A worker's extraction into a store-backed team directory: the extraction job asks for a push that names it,
// the team-sync job syncs through the SDK with that job as the author, and the store's version records it
// (`created_by.job`). Real BullMQ, the scripted model over HTTP, the Memory Stores API on PostgreSQL.

const scripted = useModelServer();
const { closer } = scripted;
let stores: MemoryStoresTestServer;
beforeAll(async () => {
  stores = await startMemoryStoresTestServer({ postgresUrl: inject('postgresUrl') });
});
afterAll(async () => stores?.close());

describe('team-sync through a memory store', () => {
  it('an extraction into team/ shows up as a store version whose author is the extraction job', async () => {
    const key = stores.issueKey('acme');
    const client = new Anthropic({ baseURL: stores.url, apiKey: key, maxRetries: 0 });
    const { id: storeId } = await client.beta.memoryStores.create({ name: 'widgets team' });
    const fg = createForeground(scripted.server);
    const note =
      '---\nname: Release train\ndescription: releases leave on Tuesdays\ntype: project\n---\nReleases leave on Tuesdays.\n';
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Noted.')]);
    let step = 0;
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (): ScriptStep => {
        step++;
        if (step === 1)
          return reply(
            text('Saving for the team.'),
            toolUse('Write', { file_path: join(fg.paths.teamDir, 'release-train.md'), content: note }),
          );
        return textReply('Saved.');
      },
      { sticky: true },
    );
    const leaf = await fg.turn('team rule: releases leave on Tuesdays');
    const service = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: fg.engramHome,
      queues: 'extract,team-sync',
      closer,
      env: {
        ENGRAM_TEAM_SYNC_URL: stores.url,
        ENGRAM_TEAM_SYNC_KEY: key,
        ENGRAM_TEAM_MEMORY_STORE: `acme/widgets=${storeId}`,
      },
    });
    const producer = closer.add(new JobProducer(service.engine));
    const payload = fg.extractPayload(leaf);
    // The session start's pull: binds the project to its store (the state names the repository).
    const pull = await producer.enqueue('team-sync', {
      projectDir: payload.projectDir,
      transcriptDir: payload.transcriptDir,
      repo: 'acme/widgets',
      action: 'pull',
      reason: 'session-start',
      debounceMs: 0,
      requestedAt: new Date().toISOString(),
    });
    const pulled = await waitForFinishedJob(producer.queue('team-sync'), pull.jobId);
    expect(pulled.failedReason).toBeUndefined();
    expect((pulled.returnvalue as TeamSyncResult).protocol).toBe('memory-store');

    const extract = await producer.enqueue('extract', payload);
    const job = await waitForFinishedJob(producer.queue('extract'), extract.jobId);
    expect((job.returnvalue as ExtractResult).outcome).toBe('extracted');
    const onDisk = readFileSync(join(fg.paths.teamDir, 'release-train.md'), 'utf8');

    // The authored push runs on its own; wait for the memory to land.
    let memoryId: string | undefined;
    for (let i = 0; i < 200 && !memoryId; i++) {
      for await (const m of client.beta.memoryStores.memories.list(storeId, { view: 'basic' }))
        if (m.type === 'memory' && m.path === '/release-train.md') memoryId = m.id;
      if (!memoryId) await new Promise((r) => setTimeout(r, 100));
    }
    expect(memoryId).toBeDefined();
    const memory = await client.beta.memoryStores.memories.retrieve(memoryId!, { memory_store_id: storeId });
    expect(memory.content).toBe(onDisk);
    const versions = [];
    for await (const v of client.beta.memoryStores.memoryVersions.list(storeId, { memory_id: memoryId! }))
      versions.push(v);
    expect(versions.map((v) => [v.operation, v.created_by])).toEqual([
      ['created', { type: 'api_actor', api_key_id: 'apikey_acme', job: `extract:${extract.jobId}` }],
    ]);
    // The push named the job's own files, from its receipt (the note and the index pointer it added): only they
    // carry its name.
    // The memory lands while the push job runs: on a loaded machine the job may not have moved to completed yet.
    const pushes = await producer.queue('team-sync').getJobs(['active', 'completed']);
    const authored = pushes.find((j) => j.data.author === `extract:${extract.jobId}`);
    expect(authored?.data.authoredKeys).toEqual(['MEMORY.md', 'release-train.md']);

    // Deleted here: the next pass does not delete it in the store yet; it asks for a push that looks again once
    // the delete is corroborated (30 s on).
    rmSync(join(fg.paths.teamDir, 'release-train.md'));
    const again = await producer.enqueue('team-sync', {
      projectDir: payload.projectDir,
      transcriptDir: payload.transcriptDir,
      repo: 'acme/widgets',
      action: 'pull',
      reason: 'session-start',
      debounceMs: 0,
      requestedAt: new Date().toISOString(),
    });
    expect((await waitForFinishedJob(producer.queue('team-sync'), again.jobId)).failedReason).toBeUndefined();
    const memories = [];
    for await (const m of client.beta.memoryStores.memories.list(storeId)) memories.push(m.path);
    expect(memories).toContain('/release-train.md');
    const state = JSON.parse(readFileSync(join(fg.paths.projectDir, STORE_SYNC_STATE_FILENAME), 'utf8'));
    const dueAt = Date.parse(state.pendingDeletes['release-train.md']) + DELETE_CORROBORATION_MS;
    const waiting = await producer.queue('team-sync').getJobs(['delayed', 'waiting', 'active']);
    const followUp = waiting.find((j) => j.data.action === 'push' && j.data.reason === 'write');
    expect(Date.parse(followUp?.data.requestedAt) + followUp?.data.debounceMs).toBeGreaterThanOrEqual(dueAt);
  });
});
