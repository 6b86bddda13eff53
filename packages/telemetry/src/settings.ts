// Whether a process exports telemetry, and where to, read from the standard OTEL_* variables only (the
// OpenTelemetry SDK reads the same ones when it starts). Pure: it takes the environment and returns data, so
// `engram doctor`, `/readyz` and the setup agree on one reading.

/** The kinds of process Engram runs; each names its default `service.name`. */
export type ProcessKind = 'serve' | 'workers' | 'dev' | 'cli';

export const DEFAULT_SERVICE_NAMES: Record<ProcessKind, string> = {
  serve: 'engram-serve',
  workers: 'engram-workers',
  dev: 'engram-dev',
  cli: 'engram-cli',
};

export type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';

export type TelemetrySettings =
  | { enabled: false; reason: string }
  | {
      enabled: true;
      serviceName: string;
      /** The OTLP endpoint the exporters send to (the SDK's default when no variable names one). */
      endpoint: string;
      protocol: OtlpProtocol;
      /** The exporters per signal, as OTEL_*_EXPORTER lists them; `none` turns a signal off. */
      traces: string[];
      metrics: string[];
      logs: string[];
    };

type Env = Readonly<Record<string, string | undefined>>;

const SIGNAL_VARIABLES = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
  'OTEL_EXPORTER_OTLP_LOGS_ENDPOINT',
  'OTEL_TRACES_EXPORTER',
  'OTEL_METRICS_EXPORTER',
  'OTEL_LOGS_EXPORTER',
] as const;

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
}

function exporters(value: string | undefined): string[] {
  const named = list(value);
  // The SDK's rule: unset means otlp, and `none` anywhere turns the signal off.
  if (named.length === 0) return ['otlp'];
  return named.includes('none') ? [] : named;
}

function defaultEndpoint(protocol: OtlpProtocol): string {
  return protocol === 'grpc' ? 'http://localhost:4317' : 'http://localhost:4318';
}

/**
 * Telemetry is off unless an OTEL_* variable asks for an exporter (an endpoint or an exporter list), and off
 * whenever OTEL_SDK_DISABLED is true: an unconfigured process loads no SDK at all.
 */
export function telemetrySettings(env: Env, kind: ProcessKind): TelemetrySettings {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') {
    return { enabled: false, reason: 'OTEL_SDK_DISABLED=true' };
  }
  if (!SIGNAL_VARIABLES.some((name) => (env[name] ?? '').trim() !== '')) {
    return { enabled: false, reason: 'no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_*_EXPORTER set' };
  }
  const traces = exporters(env.OTEL_TRACES_EXPORTER);
  const metrics = exporters(env.OTEL_METRICS_EXPORTER);
  const logs = exporters(env.OTEL_LOGS_EXPORTER);
  if (traces.length + metrics.length + logs.length === 0) {
    return { enabled: false, reason: 'every OTEL_*_EXPORTER is none' };
  }
  const rawProtocol = (env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim().toLowerCase();
  const protocol: OtlpProtocol =
    rawProtocol === 'grpc' || rawProtocol === 'http/json' ? rawProtocol : 'http/protobuf';
  const serviceName = (env.OTEL_SERVICE_NAME ?? '').trim() || DEFAULT_SERVICE_NAMES[kind];
  const endpoint =
    (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '').trim() ||
    defaultEndpoint(protocol);
  return { enabled: true, serviceName, endpoint: redactEndpoint(endpoint), protocol, traces, metrics, logs };
}

/** An endpoint as reports show it: credentials in the URL never reach a log, `/readyz` or `doctor`. */
function redactEndpoint(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    if (url.username || url.password) {
      url.username = '';
      url.password = '';
    }
    url.search = '';
    return url.toString().replace(/\/$/, '');
  } catch {
    return '(not a URL)';
  }
}

/** One line for `engram doctor` and logs. */
export function describeTelemetry(settings: TelemetrySettings): string {
  if (!settings.enabled) return `off (${settings.reason})`;
  const signals = [
    settings.traces.length ? `traces: ${settings.traces.join(',')}` : 'traces: none',
    settings.metrics.length ? `metrics: ${settings.metrics.join(',')}` : 'metrics: none',
    settings.logs.length ? `logs: ${settings.logs.join(',')}` : 'logs: none',
  ];
  return `on as ${settings.serviceName} → ${settings.endpoint} (${settings.protocol}; ${signals.join('; ')})`;
}

/** What `/readyz` says of telemetry: on or off, and where it goes (never credentials). */
export function telemetryReport(
  settings: TelemetrySettings,
):
  | { enabled: false; reason: string }
  | { enabled: true; serviceName: string; endpoint: string; protocol: string } {
  if (!settings.enabled) return { enabled: false, reason: settings.reason };
  return {
    enabled: true,
    serviceName: settings.serviceName,
    endpoint: settings.endpoint,
    protocol: settings.protocol,
  };
}
