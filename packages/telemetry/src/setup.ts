import type { BullMQOtel } from 'bullmq-otel';
import { type LineSink, pinoLineSink } from './logs.js';
import { scopeSpanProcessor } from './scope.js';
import { type ProcessKind, type TelemetrySettings, telemetrySettings } from './settings.js';

// The process's OpenTelemetry: started once at process start by each entry point (`engram …`,
// `engram-workers`), from the OTEL_* variables. Off, it costs one read of the environment: neither the SDK
// nor the BullMQ add-on is imported. On, it is the official Node SDK (exporters chosen by OTEL_* as the SDK
// chooses them), with BullMQ's telemetry add-on so every job carries its producer's trace context.

export interface TelemetryHandle {
  readonly settings: TelemetrySettings;
  /** BullMQ's `telemetry` option for every Queue and Worker of this process; undefined when off. */
  readonly bullmq: BullMQOtel | undefined;
  /**
   * Where a pino logger also writes its lines when log records are exported (OTEL_LOGS_EXPORTER not `none`):
   * each becomes an OpenTelemetry log record with the active trace context. Undefined when off.
   */
  readonly logSink: LineSink | undefined;
  /**
   * Exports what the span, log and metric providers hold, waiting at most `timeoutMs` (default
   * SHUTDOWN_FLUSH_MS); false when the bound cut it short (an unreachable collector).
   */
  flush(timeoutMs?: number): Promise<boolean>;
  /**
   * Flushes every provider and stops the SDK, bounded like flush: every process calls it before it exits, so
   * the spans of its last moments (a turn, a job, a model thread's call) are not lost with the process.
   */
  shutdown(timeoutMs?: number): Promise<boolean>;
}

/**
 * How long a process waits for its last export before it exits. The exporters' own timeouts (10 s, 30 s for
 * a batch) suit a live process, not one being stopped: an unreachable collector must not hold up a restart.
 */
export const SHUTDOWN_FLUSH_MS = 2_000;

/** Runs `work`, waiting at most `ms`: whether it settled in time (its failure counts as settled). */
export async function within(ms: number, work: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const OFF = (settings: TelemetrySettings): TelemetryHandle => ({
  settings,
  bullmq: undefined,
  logSink: undefined,
  flush: async () => true,
  shutdown: async () => true,
});

// The process's one handle. OpenTelemetry's providers are process-global by design (the SDK registers them
// with @opentelemetry/api, where the Anthropic SDK and BullMQ's add-on find them); this mirrors that.
let current: TelemetryHandle | undefined;

/** The running telemetry, or an "off" handle when no entry point started it (tests, library use). */
export function activeTelemetry(): TelemetryHandle {
  return current ?? OFF({ enabled: false, reason: 'not started in this process' });
}

export async function startTelemetry(
  kind: ProcessKind,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<TelemetryHandle> {
  if (current) return current;
  const settings = telemetrySettings(env, kind);
  if (!settings.enabled) {
    current = OFF(settings);
    return current;
  }
  const [{ NodeSDK }, { BatchSpanProcessor, ConsoleSpanExporter }, { BullMQOtel }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('bullmq-otel'),
  ]);
  const exporters = await Promise.all(
    settings.traces.map(async (name) => {
      if (name === 'console') return new ConsoleSpanExporter();
      if (name !== 'otlp') return undefined;
      // The exporter of the configured protocol; each reads its own OTEL_EXPORTER_OTLP_* variables.
      if (settings.protocol === 'grpc')
        return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
      if (settings.protocol === 'http/json')
        return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
    }),
  );
  const sdk = new NodeSDK({
    serviceName: settings.serviceName,
    // The scope processor first, so the exporters' processors see a job's tenant and project on every span.
    spanProcessors: [
      scopeSpanProcessor(),
      ...exporters.filter((e) => e !== undefined).map((e) => new BatchSpanProcessor(e)),
    ],
    // No automatic instrumentation: Engram starts its own spans where they mean something, and the
    // Anthropic SDK and BullMQ's add-on start theirs.
    instrumentations: [],
  });
  sdk.start();
  const [{ trace, metrics }, { logs }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/api-logs'),
  ]);
  const bullmq = new BullMQOtel({ tracerName: 'bullmq', version: BULLMQ_SCOPE_VERSION });
  let stopped: Promise<boolean> | undefined;
  current = {
    settings,
    bullmq,
    // The SDK registered a logger provider from OTEL_LOGS_EXPORTER (none when it says `none`).
    logSink: settings.logs.length > 0 ? pinoLineSink(logs.getLogger('engram')) : undefined,
    flush(timeoutMs = SHUTDOWN_FLUSH_MS) {
      const provider = trace.getTracerProvider() as { getDelegate?(): { forceFlush?(): Promise<void> } };
      const meters = metrics.getMeterProvider() as { forceFlush?(): Promise<void> };
      const loggers = logs.getLoggerProvider() as { forceFlush?(): Promise<void> };
      return within(
        timeoutMs,
        Promise.allSettled([
          provider.getDelegate?.().forceFlush?.(),
          meters.forceFlush?.(),
          loggers.forceFlush?.(),
        ]),
      );
    },
    // The SDK's shutdown flushes each provider first (the batch processors export what they hold).
    shutdown(timeoutMs = SHUTDOWN_FLUSH_MS) {
      stopped ??= within(timeoutMs, sdk.shutdown());
      return stopped;
    },
  };
  return current;
}

/** The add-on's instrumentation scope version: the BullMQ major Engram is built on. */
const BULLMQ_SCOPE_VERSION = '6';
