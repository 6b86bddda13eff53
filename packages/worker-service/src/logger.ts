import { activeTelemetry } from '@engram/telemetry/setup';
import { traceLogFields } from '@engram/telemetry/spans';
import { type Logger, type LoggerOptions, pino } from 'pino';

// JSON logs on stdout. Secrets never reach a log line: known secret-bearing fields are redacted by path.
// When the process exports log records (telemetry on, OTEL_LOGS_EXPORTER not `none`), every line — already
// redacted — is also an OpenTelemetry log record carrying the active trace context (docs/telemetry.md).

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: 'engram-workers', pid: process.pid, ...base },
    redact: {
      paths: [
        'apiKey',
        '*.apiKey',
        'password',
        '*.password',
        'token',
        '*.token',
        'authorization',
        '*.authorization',
      ],
      censor: '[redacted]',
    },
    timestamp: pino.stdTimeFunctions.isoTime,
    // A line logged inside a span carries its trace_id and span_id (nothing when telemetry is off).
    mixin: traceLogFields,
  };
  const sink = activeTelemetry().logSink;
  if (!sink) return pino(options);
  return pino(
    options,
    pino.multistream([
      { level: 'trace', stream: pino.destination(1) },
      { level: 'trace', stream: sink },
    ]),
  );
}

export type { Logger };
