import { describeReceipts } from '@engram/agent-session/agent-session';
import type { ExtractionOutcome } from '@engram/agent-session/extraction-outcome';

// How `engram run` tells what became of its turn's memory work (packages/agent-session's extraction-outcome.ts
// decides the outcome; this is the CLI's wording of it).

/** One line for stderr, or undefined when there is nothing worth saying. */
export function describeExtraction(outcome: ExtractionOutcome): string | undefined {
  switch (outcome.status) {
    case 'done':
      return outcome.receipts.some((r) => r.memories.length) ? describeReceipts(outcome.receipts) : undefined;
    case 'failed':
      return `engram: memory extraction failed after ${outcome.attempts} attempt${outcome.attempts === 1 ? '' : 's'}: ${outcome.reason}`;
    case 'retrying':
      return `engram: memory extraction has failed ${outcome.attempts} time${outcome.attempts === 1 ? '' : 's'} (last: ${outcome.lastError}); the workers retry it.`;
    case 'pending':
      return `engram: memory extraction still pending after ${outcome.waitedMs} ms; it continues in the workers.`;
    case 'not-queued':
      return outcome.kept
        ? `engram: memory work not queued yet, kept in the session's outbox: ${outcome.reason}`
        : `engram: memory work was not queued (and is lost): ${outcome.reason}`;
    default:
      return undefined;
  }
}
