import { activeTelemetry, startTelemetry } from '@engram/telemetry/setup';
import { inSpan } from '@engram/telemetry/spans';
import { type OtlpReceiver, startOtlpReceiver } from '@engram/testkit/otlp-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

// The workers' logger with telemetry on: the real Node SDK (this test file's own process) exporting OTLP/HTTP
// JSON to a receiver here. A line is also a log record — redacted like the line, with the trace context of
// the span it was logged in.

let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // The SDK's exporters read these from the process environment, as in production.
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_METRICS_EXPORTER: 'none',
  });
  await startTelemetry('workers');
});
afterAll(async () => {
  await activeTelemetry().shutdown();
  await receiver.close();
});

describe('createLogger with telemetry on', () => {
  it('exports each line as a log record: redacted, with the span’s ids inside a span and none outside', async () => {
    expect(activeTelemetry().logSink).toBeDefined();
    const logger = createLogger('info');
    let ids = { traceId: '', spanId: '' };
    await inSpan('process memory-extract', {}, async (span) => {
      ids = span.spanContext();
      logger.info({ queue: 'extract', apiKey: 'sk-ant-secret', nested: { token: 't0ken' } }, 'job completed');
    });
    logger.warn({ queue: 'extract' }, 'outside any span');
    logger.debug('below the level: neither a line nor a record');
    let logs = receiver.logs();
    for (let i = 0; i < 100 && logs.length < 2; i++) {
      await activeTelemetry().flush();
      logs = receiver.logs();
      await new Promise((r) => setTimeout(r, 50));
    }
    const inside = logs.find((l) => l.body === 'job completed');
    expect(inside).toMatchObject({
      traceId: ids.traceId,
      spanId: ids.spanId,
      severityText: 'INFO',
      service: 'engram-workers',
      attributes: { queue: 'extract', apiKey: '[redacted]', service: 'engram-workers' },
    });
    expect(JSON.stringify(logs)).not.toContain('sk-ant-secret');
    expect(JSON.stringify(logs)).not.toContain('t0ken');
    const outside = logs.find((l) => l.body === 'outside any span');
    expect(outside).toMatchObject({ traceId: '', spanId: '', severityText: 'WARN' });
    expect(logs.map((l) => l.body)).not.toContain('below the level: neither a line nor a record');
  });
});
