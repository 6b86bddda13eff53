import type {
  HookCallback,
  HookCallbackMatcher,
  HookEvent as SdkHookEvent,
  SyncHookJSONOutput,
} from '@anthropic-ai/claude-agent-sdk';
import { DEFAULT_MODEL } from '@engram/config/env';
import { handleClaudeCodeHook } from '@engram/memory-client/claude-code-hooks';
import { MemoryQueue, type MemoryQueueConfig } from '@engram/memory-client/memory-queue';
import type { TeamSyncConfig } from '@engram/memory-client/team-sync-trigger';
import { HOOK_EVENTS, type HookEvent, parseHookInput } from '@engram/memory-core/hooks/claude-code-hook';
import { type QueueBackendConfig, resolveBackendConfig } from '@engram/queue/backend-config';

// Engram's memory for the Agent SDK's `query()`: hook callbacks that run in the host process (no process
// per hook) and enqueue through the job producer, with exactly what `engram hook <event>` does
// (@engram/memory-client's claude-code-hooks.ts). The Agent SDK runs Claude Code, whose hook inputs carry
// `session_id`, `transcript_path` and `cwd`: Claude Code's config directory must be Engram's home, so the
// workers read that transcript and write that project's memory directory.

/** Where the queue is: a Redis or PostgreSQL URL (as REDIS_URL / ENGRAM_QUEUE_URL), or a resolved backend. */
export interface EngramQueueOptions {
  url?: string;
  backend?: QueueBackendConfig;
  /** The deployment's queue namespace (ENGRAM_NAMESPACE); default `engram`. */
  namespace?: string;
  enqueueTimeoutMs?: number;
  cleanupPeriodDays?: number;
}

export interface EngramHooksOptions {
  /** Claude Code's config directory for these queries (CLAUDE_CONFIG_DIR in `options.env`): Engram's home. */
  engramHome: string;
  /** The queue to enqueue on, or a MemoryQueue the host already has (then the host closes it). */
  queue: EngramQueueOptions | MemoryQueue;
  memoryDirOverride?: string;
  /** Model and output budget of the memory forks the workers run for these sessions. */
  model?: string;
  maxOutputTokens?: number;
  /** Team memory sync; SessionStart pulls (and reports it as context) only when set. */
  teamSync?: TeamSyncConfig;
  /** The hosted tenant these sessions belong to (decided by the host, never by the model or the input). */
  tenant?: string;
  /** Bounded wait for the recall selector on UserPromptSubmit (default 4 s). */
  recallWaitMs?: number;
  /**
   * How long Stop waits for the turn's reply to reach the transcript (default 3 s; it returns as soon as it
   * has): under the Agent SDK, Claude Code may fire Stop before the turn's first entry is on disk.
   */
  stopSettleMs?: number;
  /** What each hook did, one line (for the host's log); hooks never throw into the query. */
  onNote?: (event: HookEvent, note: string) => void;
}

export interface EngramHooks {
  /** Pass as `options.hooks` to `query()`. */
  hooks: Partial<Record<SdkHookEvent, HookCallbackMatcher[]>>;
  /** The producer side the callbacks share. */
  memory: MemoryQueue;
  /** Closes the queue connections (hands over what waits in an outbox first); not a MemoryQueue passed in. */
  close(): Promise<void>;
}

const SDK_STOP_SETTLE_MS = 3_000;

/** Seconds Claude Code waits for one callback (the callbacks bound their own waits well below this). */
const HOOK_TIMEOUT_S = 30;

export function memoryQueueConfig(engramHome: string, queue: EngramQueueOptions): MemoryQueueConfig {
  const backend =
    queue.backend ??
    resolveBackendConfig(
      queue.url
        ? /^postgres(ql)?:/.test(queue.url)
          ? { ENGRAM_QUEUE_URL: queue.url }
          : { REDIS_URL: queue.url }
        : {},
    );
  return {
    engramHome,
    backend,
    namespace: queue.namespace ?? 'engram',
    enqueueTimeoutMs: queue.enqueueTimeoutMs ?? 2_000,
    cleanupPeriodDays: queue.cleanupPeriodDays ?? 30,
  };
}

/** Hook callbacks for `query({ options: { hooks } })`: Stop, UserPromptSubmit, SessionStart, PreCompact, SessionEnd. */
export function engramHooks(opts: EngramHooksOptions): EngramHooks {
  const owned = !(opts.queue instanceof MemoryQueue);
  const memory =
    opts.queue instanceof MemoryQueue
      ? opts.queue
      : new MemoryQueue(memoryQueueConfig(opts.engramHome, opts.queue));
  const fork = { model: opts.model ?? DEFAULT_MODEL, maxOutputTokens: opts.maxOutputTokens ?? 16_000 };

  const callback =
    (event: HookEvent): HookCallback =>
    async (input, _toolUseId, { signal }) => {
      const parsed = parseHookInput(JSON.stringify(input), event);
      if (!parsed.ok) {
        opts.onNote?.(event, `engram hook ${event}: ${parsed.reason}; nothing done.`);
        return {};
      }
      try {
        const work = handleClaudeCodeHook(
          {
            engramHome: opts.engramHome,
            memoryDirOverride: opts.memoryDirOverride,
            memory,
            fork,
            teamSync: opts.teamSync,
            tenant: opts.tenant,
            ...(opts.recallWaitMs !== undefined ? { recallWaitMs: opts.recallWaitMs } : {}),
            stopSettleMs: opts.stopSettleMs ?? SDK_STOP_SETTLE_MS,
          },
          event,
          parsed.input,
        );
        // An aborted query does not wait: the answer is nothing; the work itself ends within its own bounds.
        const result = await untilAborted(work, signal);
        if (!result) {
          void work.catch(() => {});
          opts.onNote?.(event, `engram hook ${event}: the query was aborted; no answer.`);
          return {};
        }
        if (result.note) opts.onNote?.(event, result.note);
        return contextOutput(event, result.context);
      } catch (error) {
        // A hook never breaks the query: durable work is already in the outbox when the queue is down.
        opts.onNote?.(event, `engram hook ${event}: ${(error as Error).message}; nothing done.`);
        return {};
      }
    };

  const hooks: Partial<Record<SdkHookEvent, HookCallbackMatcher[]>> = {};
  for (const event of HOOK_EVENTS) hooks[event] = [{ hooks: [callback(event)], timeout: HOOK_TIMEOUT_S }];
  return {
    hooks,
    memory,
    close: async () => {
      if (owned) await memory.close();
    },
  };
}

function contextOutput(event: HookEvent, context: string | undefined): SyncHookJSONOutput {
  if (!context) return {};
  if (event === 'UserPromptSubmit' || event === 'SessionStart') {
    return { hookSpecificOutput: { hookEventName: event, additionalContext: context } };
  }
  return {};
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T | undefined> {
  if (!signal) return work;
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
