import { context, propagation, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { tracer } from './spans.js';

// The HTTP server span of a request (semantic conventions: `{method} {route}`, SERVER kind), continuing a
// caller's `traceparent` when it sends one. Framework-neutral: the app gives the method, headers and, once
// routed, the route and status.

export interface HttpExchange {
  method: string;
  path: string;
  header(name: string): string | undefined;
}

export async function withHttpServerSpan(
  exchange: HttpExchange,
  handle: (span: Span) => Promise<{ route: string | undefined; status: number }>,
): Promise<void> {
  const traceparent = exchange.header('traceparent');
  // Most requests carry no trace context: nothing to extract, the span starts a trace.
  const parent = traceparent
    ? propagation.extract(
        context.active(),
        { traceparent, tracestate: exchange.header('tracestate') },
        {
          keys: (c) => Object.keys(c).filter((k) => c[k as keyof typeof c] !== undefined),
          get: (c, key) => c[key as keyof typeof c],
        },
      )
    : context.active();
  const span = tracer().startSpan(
    exchange.method,
    {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': exchange.method, 'url.path': exchange.path },
    },
    parent,
  );
  try {
    const { route, status } = await context.with(trace.setSpan(parent, span), () => handle(span));
    if (route) {
      span.updateName(`${exchange.method} ${route}`);
      span.setAttribute('http.route', route);
    }
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  } finally {
    span.end();
  }
}
