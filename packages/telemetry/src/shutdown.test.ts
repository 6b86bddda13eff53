import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHUTDOWN_FLUSH_MS, startTelemetry, type TelemetryHandle } from './setup.js';
import { inSpan } from './spans.js';

// A process exports what it holds before it exits, but an unreachable collector must not hold up the exit:
// flush and shutdown wait at most their bound. The real Node SDK (this file's own process) exporting OTLP/HTTP
// to a collector here that either never answers (a hung collector) or answers.

let answering = false;
const held: ServerResponse[] = [];
const exported: string[] = [];
const collector = createServer((req: IncomingMessage, res: ServerResponse) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (!answering) {
      held.push(res);
      return;
    }
    if (req.url === '/v1/traces') exported.push(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
});
let telemetry: TelemetryHandle;

beforeAll(async () => {
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_LOGS_EXPORTER: 'none',
    OTEL_BSP_SCHEDULE_DELAY: '600000',
  });
  telemetry = await startTelemetry('serve');
});
afterAll(async () => {
  for (const res of held) res.destroy();
  collector.closeAllConnections();
  await new Promise((r) => collector.close(r));
});

describe('flush and shutdown, bounded', () => {
  it('a hung collector costs the bound, not the exporter’s timeout; an answering one gets the spans', async () => {
    expect(SHUTDOWN_FLUSH_MS).toBeLessThanOrEqual(2_000);
    await inSpan('engram.turn', {}, async () => {});
    // Hung: the export is still waiting for an answer when the bound ends it.
    expect(await telemetry.flush(200)).toBe(false);
    expect(held.length).toBeGreaterThan(0);
    expect(exported).toEqual([]);

    // Positive control: the collector answers, and the next flush delivers a span.
    answering = true;
    await inSpan('engram.turn', { attributes: { 'engram.test': 'second' } }, async () => {});
    expect(await telemetry.flush()).toBe(true);
    expect(exported.join('\n')).toContain('second');

    // Shutdown is bounded the same way when the collector hangs again with a span still held.
    answering = false;
    await inSpan('engram.turn', {}, async () => {});
    expect(await telemetry.shutdown(200)).toBe(false);
  });
});
