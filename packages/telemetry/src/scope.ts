import { type Context, context, createContextKey, trace } from '@opentelemetry/api';
import type { Span, SpanProcessor } from '@opentelemetry/sdk-trace-base';

// A job's tenant and project travel in the OpenTelemetry context, so every span started while the job runs —
// Engram's, BullMQ's, the Anthropic SDK's — gets `engram.tenant` and `engram.project` from one processor,
// without each call site repeating them. The scope comes from the validated job payload, which the producer
// built from the authenticated request: never from model output.

export const ATTR_ENGRAM_TENANT = 'engram.tenant';
export const ATTR_ENGRAM_PROJECT = 'engram.project';

/** The tenant of the CLI and of unauthenticated local work (the operator's own home). */
export const OPERATOR_TENANT = '_operator';

export interface JobScope {
  tenant?: string | undefined;
  project?: string | undefined;
}

const SCOPE_KEY = createContextKey('engram.job-scope');

export function scopeAttributes(scope: JobScope): Record<string, string> {
  return {
    [ATTR_ENGRAM_TENANT]: scope.tenant ?? OPERATOR_TENANT,
    ...(scope.project ? { [ATTR_ENGRAM_PROJECT]: scope.project } : {}),
  };
}

/**
 * Runs `fn` with `scope` on the active context (a no-op context manager when telemetry is off), and stamps
 * the active span (BullMQ's job span, started before the handler) with it too.
 */
export function withScope<T>(scope: JobScope, fn: () => T): T {
  trace.getActiveSpan()?.setAttributes(scopeAttributes(scope));
  return context.with(context.active().setValue(SCOPE_KEY, scope), fn);
}

export function scopeOf(ctx: Context): JobScope | undefined {
  return ctx.getValue(SCOPE_KEY) as JobScope | undefined;
}

export function scopeSpanProcessor(): SpanProcessor {
  return {
    onStart(span: Span, parentContext: Context) {
      const scope = scopeOf(parentContext);
      if (scope) span.setAttributes(scopeAttributes(scope));
    },
    onEnd() {},
    forceFlush: async () => {},
    shutdown: async () => {},
  };
}
