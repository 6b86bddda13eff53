import { z } from 'zod';
import { SessionState } from '../state/session-state.js';
import type { StateStore } from '../state/state-store.js';
import { tenantKey } from '../state/tenant-scope.js';
import { forkUsage, leafRef, projectRef, sessionId } from './common.js';

// extract: after a turn ends, distil memories from the messages since the session's cursor (docs/design.md §5).

export const extractPayload = projectRef.extend(leafRef.shape).extend({
  sessionId,
  requestedAt: z.iso.datetime(),
});
export type ExtractPayload = z.infer<typeof extractPayload>;

export const memoryReceiptItem = z.object({
  /** Path relative to the memory directory. */
  path: z.string(),
  type: z.string().optional(),
  action: z.enum(['created', 'updated']),
});

export const extractResult = z.object({
  outcome: z.enum([
    'extracted',
    'skipped-direct-write',
    'skipped-no-new-messages',
    'skipped-stale',
    'skipped-incomplete-turn',
  ]),
  sessionId,
  fromSeq: z.number().int().nonnegative(),
  toSeq: z.number().int().nonnegative(),
  memories: z.array(memoryReceiptItem),
  turns: z.number().int().nonnegative(),
  usage: forkUsage,
  deniedToolCalls: z.number().int().nonnegative(),
});
export type ExtractResult = z.infer<typeof extractResult>;

export const extractJob = {
  kind: 'extract',
  queue: 'memory-extract',
  payload: extractPayload,
  /** One active + one pending per session; the newest pending payload wins. */
  deduplicationId: (p: ExtractPayload) => tenantKey(p.tenant, `extract:${p.transcriptDir}:${p.sessionId}`),
  /**
   * BullMQ deduplication keeps the *first* payload while a job is still waiting; recording the newest request
   * lets the worker cover it anyway, so the newest pending payload wins in every state.
   */
  beforeEnqueue: async (p: ExtractPayload, state: StateStore) => {
    await new SessionState(state, p).noteExtractRequested({ leafUuid: p.leafUuid, leafSeq: p.leafSeq });
  },
} as const;
