import { describe, expect, it } from 'vitest';
import { describeTelemetry, telemetryReport, telemetrySettings } from './settings.js';

describe('telemetrySettings', () => {
  it('is off with no OTEL_* variable, and off whenever OTEL_SDK_DISABLED is true', () => {
    expect(telemetrySettings({}, 'serve')).toEqual({
      enabled: false,
      reason: 'no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_*_EXPORTER set',
    });
    expect(
      telemetrySettings({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'serve'),
    ).toEqual({ enabled: false, reason: 'OTEL_SDK_DISABLED=true' });
    expect(
      telemetrySettings(
        { OTEL_TRACES_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none' },
        'cli',
      ),
    ).toEqual({ enabled: false, reason: 'every OTEL_*_EXPORTER is none' });
  });

  it('is on with one endpoint: the service name per process kind, protocol default http/protobuf', () => {
    const on = telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, 'workers');
    expect(on).toEqual({
      enabled: true,
      serviceName: 'engram-workers',
      endpoint: 'http://collector:4318',
      protocol: 'http/protobuf',
      traces: ['otlp'],
      metrics: ['otlp'],
      logs: ['otlp'],
    });
    expect(describeTelemetry(on)).toBe(
      'on as engram-workers → http://collector:4318 (http/protobuf; traces: otlp; metrics: otlp; logs: otlp)',
    );
  });

  it('takes OTEL_SERVICE_NAME, grpc with its default port, and per-signal exporters', () => {
    const on = telemetrySettings(
      {
        OTEL_SERVICE_NAME: 'replica-7',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_METRICS_EXPORTER: 'none',
        OTEL_TRACES_EXPORTER: 'otlp,console',
      },
      'serve',
    );
    expect(on).toMatchObject({
      enabled: true,
      serviceName: 'replica-7',
      endpoint: 'http://localhost:4317',
      protocol: 'grpc',
      traces: ['otlp', 'console'],
      metrics: [],
    });
  });

  it('never reports credentials or a query string of the endpoint', () => {
    const on = telemetrySettings(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://user:secret@tempo.example:4318/otlp?token=abc' },
      'dev',
    );
    expect(telemetryReport(on)).toEqual({
      enabled: true,
      serviceName: 'engram-dev',
      endpoint: 'https://tempo.example:4318/otlp',
      protocol: 'http/protobuf',
    });
    expect(JSON.stringify(telemetryReport(on))).not.toContain('secret');
  });
});
