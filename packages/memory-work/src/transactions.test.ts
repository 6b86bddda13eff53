import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TEST_BACKENDS, testEngines } from '@engram/queue/backends.test-helpers';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { journalTransaction } from './transactions.js';
import { diffTrees, hashContent, hashTree } from './tree-hash.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

function writes(...paths: string[]): ChainEntry {
  return {
    type: 'assistant',
    uuid: 'u',
    message: {
      role: 'assistant',
      content: paths.map((file_path, i) => ({
        type: 'tool_use',
        id: `t${i}`,
        name: 'Write',
        input: { file_path },
      })),
    },
  } as unknown as ChainEntry;
}

describe.each(TEST_BACKENDS)('journal transaction on %s', (_kind, backend) => {
  it('tells a retry what an earlier attempt wrote, and credits it once against the pre-write state', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('journal'));
    const root = mkdtempSync(join(tmpdir(), 'engram-journal-'));
    writeFileSync(join(root, 'existing.md'), 'old');
    const key = 'extract-journal:42';

    // Attempt 1: intends to update existing.md and create new.md; both land, then the worker dies.
    const first = journalTransaction({ state: worker.state, key, root });
    expect(await first.begin(await hashTree(root))).toEqual({ recovered: [] });
    await first.noteMessage!(writes(join(root, 'existing.md'), join(root, 'new.md'), '/etc/passwd'), root);
    writeFileSync(join(root, 'existing.md'), 'new content');
    writeFileSync(join(root, 'new.md'), 'fact');

    // Attempt 2 (a new process): the journal survives in the state store.
    const second = journalTransaction({ state: worker.state, key, root });
    const before = await hashTree(root);
    const { recovered } = await second.begin(before);
    expect(recovered.sort()).toEqual(['existing.md', 'new.md']);
    expect(second.intended.sort()).toEqual(['existing.md', 'new.md']);
    const baseline = await second.baseline(before);
    expect(baseline.get('existing.md')).toBe(hashContent('old'));
    expect(baseline.get('new.md')).toBeNull();
    // This attempt writes nothing new: the receipt still credits attempt 1's writes, once.
    const after = await hashTree(root);
    const credited = second.credited(diffTrees(before, after));
    const receipt = diffTrees(baseline, after);
    expect(receipt.created.filter((f) => credited === 'all' || credited.has(f))).toEqual(['new.md']);
    expect(receipt.updated.filter((f) => credited === 'all' || credited.has(f))).toEqual(['existing.md']);
    await second.commit();
    expect(await worker.state.getJson(key)).toBeUndefined();
  });

  it('writes nothing to the state store for an attempt that intends no write; its first intent saves it', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('journal'));
    const root = mkdtempSync(join(tmpdir(), 'engram-journal-'));
    const key = 'extract-journal:9';
    const tx = journalTransaction({ state: worker.state, key, root });
    expect(await tx.begin(await hashTree(root))).toEqual({ recovered: [] });
    expect(await worker.state.getJson(key)).toBeUndefined();
    await tx.noteMessage!(writes(join(root, 'fact.md')), root);
    expect(await worker.state.getJson(key)).toEqual({ intents: { 'fact.md': null } });
    // A retry finds that journal and keeps it (saved again) until its commit.
    const retry = journalTransaction({ state: worker.state, key, root });
    await retry.begin(await hashTree(root));
    expect(retry.intended).toEqual(['fact.md']);
    expect(await worker.state.getJson(key)).toEqual({ intents: { 'fact.md': null } });
    await retry.commit();
    expect(await worker.state.getJson(key)).toBeUndefined();
  });

  it('an intended write that never landed (refused) is not recovered and changes no receipt', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('journal'));
    const root = mkdtempSync(join(tmpdir(), 'engram-journal-'));
    writeFileSync(join(root, 'kept.md'), 'same');
    const tx = journalTransaction({ state: worker.state, key: 'extract-journal:7', root });
    const before = await hashTree(root);
    await tx.begin(before);
    await tx.noteMessage!(writes(join(root, 'kept.md')), root);
    const again = journalTransaction({ state: worker.state, key: 'extract-journal:7', root });
    expect((await again.begin(await hashTree(root))).recovered).toEqual([]);
    expect(diffTrees(await again.baseline(before), await hashTree(root))).toEqual({
      created: [],
      updated: [],
      deleted: [],
    });
  });

  it('credits only what the job wrote: its Write/Edit targets and what its commit credits, not another writer’s file', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('journal'));
    const root = mkdtempSync(join(tmpdir(), 'engram-journal-'));
    const tx = journalTransaction({ state: worker.state, key: 'extract-journal:8', root });
    const before = await hashTree(root);
    await tx.begin(before);
    await tx.noteMessage!(writes(join(root, 'mine.md')), root);
    writeFileSync(join(root, 'mine.md'), 'mine');
    // Meanwhile another writer (outside this job's lease) saves its own memory and an index line.
    writeFileSync(join(root, 'theirs.md'), 'theirs');
    writeFileSync(join(root, 'MEMORY.md'), '- [Theirs](theirs.md)\n');
    const after = await hashTree(root);
    const change = diffTrees(before, after);
    expect(change.created).toEqual(['MEMORY.md', 'mine.md', 'theirs.md']);
    expect([...(tx.credited(change) as Set<string>)]).toEqual(['mine.md']);
    // The job's commit added its pointer to the index: that index is its doing too.
    tx.credit('MEMORY.md');
    expect([...(tx.credited(change) as Set<string>)].sort()).toEqual(['MEMORY.md', 'mine.md']);
  });
});
