import type { TurnResult } from '@engram/agent-session/agent-session';
import { bridgePrometheusRegistry } from '@engram/telemetry/prometheus-bridge';
import { Counter, collectDefaultMetrics, Registry } from 'prom-client';

// Prometheus metrics of the hosted agent (`engram serve`): turns, and the memory work each turn decided —
// including what did not happen (enqueue failures, index cuts), which must never be silent.

export interface AgentMetrics {
  registry: Registry;
  turns: Counter<'outcome'>;
  memoryWork: Counter<'kind' | 'status'>;
  indexOverflows: Counter<'cap'>;
  compactions: Counter<'via' | 'reactive'>;
  recordTurn(turn: TurnResult): void;
}

export function createAgentMetrics(): AgentMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'engram_agent_' });
  const turns = new Counter({
    name: 'engram_agent_turns_total',
    help: 'User turns handled, by how they ended (completed, max_turns, aborted, error).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const memoryWork = new Counter({
    name: 'engram_agent_memory_work_total',
    help: 'Memory work decided at turn boundaries, by job kind and status (queued, skipped, not-queued, injected, dropped).',
    labelNames: ['kind', 'status'],
    registers: [registry],
  });
  const indexOverflows = new Counter({
    name: 'engram_agent_index_overflows_total',
    help: 'Sessions that started with MEMORY.md cut by its 200-line or 25,000-character cap.',
    labelNames: ['cap'],
    registers: [registry],
  });
  const compactions = new Counter({
    name: 'engram_agent_compactions_total',
    help: 'Context compactions, by source (session-memory notes or a model summary) and whether reactive.',
    labelNames: ['via', 'reactive'],
    registers: [registry],
  });
  // The same instruments through OpenTelemetry when it is on; /metrics is unchanged either way.
  bridgePrometheusRegistry(registry);
  return {
    registry,
    turns,
    memoryWork,
    indexOverflows,
    compactions,
    recordTurn(turn) {
      turns.inc({ outcome: turn.endReason });
      memoryWork.inc({ kind: 'extract', status: turn.memory.extract.status });
      memoryWork.inc({ kind: 'recall', status: turn.memory.recall.status });
      memoryWork.inc({ kind: 'dream', status: turn.memory.dream.status });
      if (turn.memory.sessionMemoryUpdates) {
        memoryWork.inc({ kind: 'session-memory', status: 'queued' }, turn.memory.sessionMemoryUpdates);
      }
      if (turn.compaction)
        compactions.inc({ via: turn.compaction.via, reactive: String(turn.compaction.reactive) });
    },
  };
}
