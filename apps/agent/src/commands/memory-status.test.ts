import { describe, expect, it } from 'vitest';
import { describeExtraction } from './memory-status.js';

// `engram run`'s stderr line for a turn's memory work says whether it is lost or waits in the outbox.

describe('describeExtraction', () => {
  it('says which of the two a not-queued outcome is', () => {
    expect(describeExtraction({ status: 'not-queued', reason: 'down.', kept: true })).toContain(
      "kept in the session's outbox",
    );
    expect(describeExtraction({ status: 'not-queued', reason: 'down.' })).toContain('is lost');
  });
});
