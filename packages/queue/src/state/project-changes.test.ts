import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import {
  MAX_CHANGE_MEMORIES,
  MAX_PROJECT_CHANGES,
  ProjectChanges,
  projectChangesScope,
} from './project-changes.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

describe.each(TEST_BACKENDS)('%s project memory changes', (_kind, backend) => {
  it('announces each change once per reader, per source, bounded, and scoped by tenant', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('projchanges'));
    const feed = new ProjectChanges(worker.state, projectChangesScope({ projectDir: '-work-app' }));
    expect(await feed.newest()).toEqual({ dream: 0, 'team-pull': 0 });
    expect(await feed.record('dream', [])).toBeUndefined();

    const first = await feed.record('dream', [{ path: 'a.md', action: 'updated' }], 1_000);
    const start = await feed.newest();
    expect(start).toEqual({ dream: first?.seq, 'team-pull': 0 });
    // A later timestamp never yields a smaller seq; an earlier one still moves forward.
    const second = await feed.record('team-pull', [{ path: 'team/x.md', action: 'created' }], 500);
    const third = await feed.record('dream', [{ path: 'b.md', action: 'deleted' }], 999);
    expect(third!.seq).toBeGreaterThan(first!.seq);

    const seen = await feed.since(start);
    expect(seen.changes.map((c) => [c.source, c.memories[0]?.path])).toEqual([
      ['dream', 'b.md'],
      ['team-pull', 'team/x.md'],
    ]);
    expect(seen.marks).toEqual({ dream: third?.seq, 'team-pull': second?.seq });
    expect((await feed.since(seen.marks)).changes).toEqual([]);

    // Bounded: the last few changes, each naming a bounded number of files.
    for (let i = 0; i < 12; i++) {
      await feed.record(
        'dream',
        Array.from({ length: 50 }, (_, m) => ({ path: `m${i}-${m}.md`, action: 'created' as const })),
      );
    }
    const all = (await feed.since({})).changes.filter((c) => c.source === 'dream');
    expect(all).toHaveLength(MAX_PROJECT_CHANGES);
    for (const c of all) {
      expect(c.memories).toHaveLength(MAX_CHANGE_MEMORIES);
      expect(c.more).toBe(50 - MAX_CHANGE_MEMORIES);
    }

    // Another tenant's project of the same name has its own feed.
    const other = new ProjectChanges(
      worker.state,
      projectChangesScope({ tenant: 't2', projectDir: '-work-app' }),
    );
    expect((await other.since({})).changes).toEqual([]);
  });
});
