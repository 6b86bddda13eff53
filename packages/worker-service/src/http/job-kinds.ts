import { JOB_CATALOG, JOB_KINDS, type JobKind } from '@engram/queue/catalog';

// Surfaces name work by its job kind (`extract`, `session-memory`, `dream`, `recall`) — the CLI, metrics and
// ENGRAM_QUEUES do — never by the BullMQ queue that carries it (`memory-session`).

export function jobKindOfQueue(queueName: string): JobKind | undefined {
  return JOB_KINDS.find((kind) => JOB_CATALOG[kind].queue === queueName);
}
