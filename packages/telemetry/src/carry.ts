import { type Context, context, propagation, ROOT_CONTEXT } from '@opentelemetry/api';
import { type JobScope, scopeOf, withScope } from './scope.js';

// A trace context as it crosses to a worker thread (a model thread): the W3C headers the registered
// propagator writes, and the job's scope, as plain data for postMessage. Empty when telemetry is off.

export interface CarriedTrace {
  trace?: Record<string, string>;
  scope?: JobScope;
}

export function carryTrace(ctx: Context = context.active()): CarriedTrace {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  if (Object.keys(carrier).length === 0) return {};
  const scope = scopeOf(ctx);
  return { trace: carrier, ...(scope ? { scope: { ...scope } } : {}) };
}

/** Runs `fn` in the carried context (its trace as parent, its scope on every span). */
export function inCarriedTrace<T>(carried: CarriedTrace, fn: () => T): T {
  const ctx = propagation.extract(ROOT_CONTEXT, carried.trace ?? {});
  return context.with(ctx, () => (carried.scope ? withScope(carried.scope, fn) : fn()));
}
