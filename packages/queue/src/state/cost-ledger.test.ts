import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import { readCostLedger, recordCost } from './cost-ledger.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

describe.each(TEST_BACKENDS)('%s cost ledger', (_kind, backend) => {
  it('adds every concurrent record exactly once, per tenant and kind', async () => {
    const { worker, producer } = await testEngines(backend, closer, uniquePrefix('ledger'));
    await producer.state.ready();
    const usage = {
      inputTokens: 10,
      outputTokens: 3,
      cacheReadInputTokens: 100,
      cacheCreationInputTokens: 7,
    };
    const writes = Array.from({ length: 30 }, (_, i) =>
      recordCost(i % 2 ? worker.state : producer.state, 'acme', i % 3 ? 'extract' : 'turn', usage),
    );
    writes.push(recordCost(worker.state, 'other', 'extract', usage));
    expect(await Promise.all(writes)).toEqual(writes.map(() => true));
    const ledger = await readCostLedger(producer.state, 'acme');
    expect(ledger.extract).toEqual({ input: 200, output: 60, cache_read: 2000, cache_write: 140, count: 20 });
    expect(ledger.turn).toEqual({ input: 100, output: 30, cache_read: 1000, cache_write: 70, count: 10 });
    expect(await readCostLedger(producer.state, 'other')).toEqual({
      extract: { input: 10, output: 3, cache_read: 100, cache_write: 7, count: 1 },
    });
    expect(await readCostLedger(producer.state, 'nobody')).toEqual({});
  });

  it('adds a ledger kept as one versioned record (before the counters) into what it reads', async () => {
    const { producer } = await testEngines(backend, closer, uniquePrefix('ledger'));
    await producer.state.ready();
    await producer.state.setIfNewer('ledger:acme', 3, {
      turn: { input: 5, output: 1, cache_read: 0, cache_write: 2, count: 1 },
    });
    await recordCost(producer.state, 'acme', 'turn', {
      inputTokens: 10,
      outputTokens: 3,
      cacheReadInputTokens: 100,
      cacheCreationInputTokens: 7,
    });
    expect(await readCostLedger(producer.state, 'acme')).toEqual({
      turn: { input: 15, output: 4, cache_read: 100, cache_write: 9, count: 2 },
    });
  });
});
