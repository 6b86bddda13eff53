import { startOtlpReceiver } from '@engram/testkit/otlp-receiver';
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { activeTelemetry, startTelemetry } from './setup.js';
import { inSpan, traceLogFields } from './spans.js';

// Telemetry off: an unconfigured process starts no SDK, and Engram's spans are the API's no-op ones.

describe('startTelemetry, unconfigured', () => {
  it('registers no SDK, gives BullMQ no telemetry, and no span reaches a receiver', async () => {
    const receiver = await startOtlpReceiver();
    try {
      const handle = await startTelemetry('serve', { OTEL_SERVICE_NAME: 'ignored' });
      expect(handle.settings.enabled).toBe(false);
      expect(handle.bullmq).toBeUndefined();
      expect(handle.logSink).toBeUndefined();
      expect(activeTelemetry()).toBe(handle);
      // No provider registered: the global tracer provider is still the API's proxy with no delegate.
      const proxy = trace.getTracerProvider() as { getDelegate?(): object };
      expect(proxy.getDelegate?.().constructor.name).toBe('NoopTracerProvider');
      let fields: ReturnType<typeof traceLogFields> | undefined;
      await inSpan('engram.turn', {}, async (span) => {
        expect(span.isRecording()).toBe(false);
        fields = traceLogFields();
      });
      expect(fields).toEqual({});
      await handle.flush();
      expect(receiver.requests().size).toBe(0);
    } finally {
      await receiver.close();
    }
  });
});
