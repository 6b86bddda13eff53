import { traceLogFields } from '@engram/telemetry/spans';
import { type Logger, pino } from 'pino';

// JSON logs on stdout. Secrets never reach a log line: known secret-bearing fields are redacted by path.

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
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
  });
}

export type { Logger };
