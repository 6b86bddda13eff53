// Shared helpers for benchmarks: every benchmark times a baseline and the thing under test in the same run
// and reports their ratio, because absolute times on shared machines are noise.

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(samples: number[]): number {
  return percentile(samples, 50);
}

/** Runs `fn` `runs` times (after `warmup` untimed runs) and returns each run's milliseconds. */
export async function timeRuns(fn: () => unknown, runs: number, warmup = 2): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await fn();
    out.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return out;
}

export function ms(value: number): string {
  return `${value.toFixed(value < 10 ? 3 : 1)} ms`;
}

export interface RatioLine {
  name: string;
  baseline: number;
  measured: number;
  target: string;
  pass: boolean;
}

/** Prints one result line and returns it, so a benchmark can also emit JSON for BENCHMARKS.md. */
export function report(line: RatioLine): RatioLine {
  const ratio = line.measured / line.baseline;
  console.log(
    `${line.name}: ${ms(line.measured)} vs baseline ${ms(line.baseline)} → ratio ${ratio.toFixed(2)}× ` +
      `(target ${line.target}) ${line.pass ? 'PASS' : 'MISS'}`,
  );
  return line;
}
