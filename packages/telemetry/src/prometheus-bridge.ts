import { type BatchObservableResult, metrics, type Observable } from '@opentelemetry/api';
import type { Registry } from 'prom-client';
import { activeTelemetry } from './setup.js';

// Metrics through OpenTelemetry as well as Prometheus, from one set of instruments: the prom-client registries
// stay the instruments (so `/metrics` is byte-for-byte what it was), and this reads them on each OTel
// collection as observable instruments of the same names. A histogram goes as its Prometheus series
// (`_bucket` with `le`, `_sum`, `_count`), so the collector gets exactly what a scrape would.

type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary';

function seriesOf(name: string, type: MetricType): { name: string; monotonic: boolean }[] {
  if (type === 'counter') return [{ name, monotonic: true }];
  if (type === 'gauge') return [{ name, monotonic: false }];
  if (type === 'histogram')
    return ['_bucket', '_sum', '_count'].map((suffix) => ({ name: `${name}${suffix}`, monotonic: true }));
  return ['', '_sum', '_count'].map((suffix) => ({ name: `${name}${suffix}`, monotonic: suffix !== '' }));
}

/**
 * Reports `registry` through the OTel meter provider when telemetry is on (no-op when off). Call it once
 * per registry, after startTelemetry; metrics registered later are picked up by name on the next call only.
 */
export function bridgePrometheusRegistry(registry: Registry, meterName = 'engram'): boolean {
  if (!activeTelemetry().settings.enabled) return false;
  const meter = metrics.getMeter(meterName);
  const instruments = new Map<string, Observable>();
  for (const metric of registry.getMetricsAsArray()) {
    const { name, help } = metric as unknown as { name: string; help: string };
    const type = (metric as unknown as { type: MetricType }).type;
    for (const series of seriesOf(name, type)) {
      instruments.set(
        series.name,
        series.monotonic
          ? meter.createObservableCounter(series.name, { description: help })
          : meter.createObservableGauge(series.name, { description: help }),
      );
    }
  }
  meter.addBatchObservableCallback(
    async (result: BatchObservableResult) => {
      for (const metric of await registry.getMetricsAsJSON()) {
        for (const value of metric.values as {
          value: number;
          labels: Record<string, string | number>;
          metricName?: string;
        }[]) {
          const instrument = instruments.get(value.metricName ?? metric.name);
          if (instrument) result.observe(instrument, value.value, value.labels);
        }
      }
    },
    [...instruments.values()],
  );
  return true;
}
