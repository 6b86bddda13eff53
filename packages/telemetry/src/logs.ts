import { context } from '@opentelemetry/api';
import type { AnyValue, AnyValueMap, Logger, SeverityNumber } from '@opentelemetry/api-logs';

// Log records over OTLP: each JSON line a pino logger writes is also handed, in the same call, to the
// OpenTelemetry logs API, where the Node SDK's logger provider (its exporter chosen by OTEL_LOGS_EXPORTER and
// OTEL_EXPORTER_OTLP_*) batches and exports it. The record takes the active context at the moment of the log
// call, so a line logged inside a job's span carries that span's trace and span ids, as the line's own
// `trace_id`/`span_id` fields do. No exporter of our own: this only translates a line into a log record.

/** What pino writes to: one serialized JSON line per call, synchronously. */
export interface LineSink {
  write(line: string): void;
}

// pino's numeric levels and the OpenTelemetry severity of each (the log data model's mapping).
const SEVERITY: Record<number, { number: SeverityNumber; text: string }> = {
  10: { number: 1 as SeverityNumber, text: 'TRACE' },
  20: { number: 5 as SeverityNumber, text: 'DEBUG' },
  30: { number: 9 as SeverityNumber, text: 'INFO' },
  40: { number: 13 as SeverityNumber, text: 'WARN' },
  50: { number: 17 as SeverityNumber, text: 'ERROR' },
  60: { number: 21 as SeverityNumber, text: 'FATAL' },
};

/** A pino destination that emits every line it is given as an OpenTelemetry log record through `logger`. */
export function pinoLineSink(logger: Logger): LineSink {
  return {
    write(line: string) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      // The ids are the record's context, not attributes; the time is the record's timestamp.
      const { level, time, msg, trace_id: _t, span_id: _s, ...rest } = record;
      const severity = typeof level === 'number' ? SEVERITY[level] : undefined;
      const attributes: AnyValueMap = {};
      for (const [key, value] of Object.entries(rest)) {
        if (value !== undefined && value !== null) attributes[key] = value as AnyValue;
      }
      logger.emit({
        ...(typeof time === 'string' || typeof time === 'number' ? { timestamp: new Date(time) } : {}),
        ...(severity ? { severityNumber: severity.number, severityText: severity.text } : {}),
        ...(typeof msg === 'string' ? { body: msg } : {}),
        attributes,
        context: context.active(),
      });
    },
  };
}
