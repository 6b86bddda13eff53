import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

// An OTLP/HTTP receiver in the test process: the real exporters post their JSON export requests
// (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) to it, and tests read back the spans as a collector would see them.

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  scope: string;
  service: string;
  attributes: Record<string, unknown>;
}

export interface ReceivedLog {
  /** Empty when the record was emitted outside any span. */
  traceId: string;
  spanId: string;
  severityText: string;
  body: unknown;
  scope: string;
  service: string;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  url: string;
  spans(): ReceivedSpan[];
  /** Log records posted to `/v1/logs` (http/json). */
  logs(): ReceivedLog[];
  /** Export requests per path (`/v1/traces`, `/v1/metrics`, …). */
  requests(): Map<string, number>;
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};

function anyValue(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  return v.doubleValue;
}

function attrs(list: { key: string; value: AnyValue }[] = []): Record<string, unknown> {
  return Object.fromEntries(list.map((a) => [a.key, anyValue(a.value)]));
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const logs: ReceivedLog[] = [];
  const requests = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      requests.set(path, (requests.get(path) ?? 0) + 1);
      if (path === '/v1/traces' && String(req.headers['content-type']).includes('json')) {
        // biome-ignore lint/suspicious/noExplicitAny: the OTLP JSON export request
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as any;
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                scope: ss.scope?.name ?? '',
                service,
                attributes: attrs(s.attributes),
              });
            }
          }
        }
      }
      if (path === '/v1/logs' && String(req.headers['content-type']).includes('json')) {
        // biome-ignore lint/suspicious/noExplicitAny: the OTLP JSON export request
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as any;
        for (const rl of body.resourceLogs ?? []) {
          const service = String(attrs(rl.resource?.attributes)['service.name'] ?? '');
          for (const sl of rl.scopeLogs ?? []) {
            for (const l of sl.logRecords ?? []) {
              logs.push({
                traceId: l.traceId ?? '',
                spanId: l.spanId ?? '',
                severityText: l.severityText ?? '',
                body: l.body ? anyValue(l.body) : undefined,
                scope: sl.scope?.name ?? '',
                service,
                attributes: attrs(l.attributes),
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    logs: () => [...logs],
    requests: () => new Map(requests),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
