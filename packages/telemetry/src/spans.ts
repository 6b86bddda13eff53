import { type Attributes, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

// Engram's own spans. With telemetry off the API's tracer is a no-op: a span costs a closure and a call.

const TRACER_NAME = 'engram';

export function tracer() {
  return trace.getTracer(TRACER_NAME);
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
}

/**
 * Runs `fn` inside a new active span: the span ends when `fn` settles, with an error status and the
 * exception recorded when it throws (the error still propagates).
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        const code = (error as { code?: unknown }).code;
        span.setAttribute('error.type', typeof code === 'string' ? code : (error as Error).name);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** `trace_id` and `span_id` of the active span, for a log line; empty when there is none. */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  if (!traceId || traceId === '00000000000000000000000000000000') return {};
  return { trace_id: traceId, span_id: spanId };
}

export { SpanKind, SpanStatusCode };
