import { context, TraceFlags, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinoLineSink } from './logs.js';

// A pino line becomes an OpenTelemetry log record: severity from pino's level, the message as the body, the
// time as the timestamp, the other fields as attributes, and the trace context active at the log call.
// The real logs SDK (a provider of its own, not the global one) with its in-memory exporter.

const exporter = new InMemoryLogRecordExporter();
const provider = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter })] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(async () => {
  context.disable();
  await provider.shutdown();
});

describe('pinoLineSink', () => {
  it('emits a line as a record with its severity, body, timestamp, attributes and the active span’s ids', () => {
    const sink = pinoLineSink(provider.getLogger('engram'));
    const span = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
    };
    const line = {
      level: 40,
      time: '2026-12-02T01:00:00.000Z',
      msg: 'job attempt failed; will retry',
      queue: 'extract',
      attempt: 2,
      nested: { code: 'ENGRAM_X' },
      trace_id: span.traceId,
      span_id: span.spanId,
    };
    context.with(trace.setSpanContext(context.active(), span), () => sink.write(`${JSON.stringify(line)}\n`));
    const [record] = exporter.getFinishedLogRecords();
    expect(record).toBeDefined();
    expect(record!.severityText).toBe('WARN');
    expect(record!.severityNumber).toBe(13);
    expect(record!.body).toBe('job attempt failed; will retry');
    expect(record!.hrTime[0]).toBe(Date.parse(line.time) / 1000);
    expect(record!.attributes).toEqual({ queue: 'extract', attempt: 2, nested: { code: 'ENGRAM_X' } });
    expect(record!.spanContext).toMatchObject({ traceId: span.traceId, spanId: span.spanId });
  });

  it('outside a span a record has no trace context; a line that is not JSON is dropped, not thrown', () => {
    exporter.reset();
    const sink = pinoLineSink(provider.getLogger('engram'));
    sink.write('not json\n');
    sink.write(`${JSON.stringify({ level: 30, time: Date.now(), msg: 'engram workers running' })}\n`);
    const records = exporter.getFinishedLogRecords();
    expect(records.map((r) => r.body)).toEqual(['engram workers running']);
    expect(records[0]!.severityText).toBe('INFO');
    expect(records[0]!.spanContext).toBeUndefined();
  });
});
