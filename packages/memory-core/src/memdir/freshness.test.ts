import { describe, expect, it } from 'vitest';
import {
  memoryAgeDays,
  memoryFreshnessCaveat,
  memoryFreshnessLabel,
  recalledMemoryHeader,
} from './freshness.js';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 2, 5, 9, 30);

describe('memory freshness', () => {
  it('counts whole days, floored, never negative', () => {
    expect(memoryAgeDays(NOW, NOW)).toBe(0);
    expect(memoryAgeDays(NOW - DAY + 1, NOW)).toBe(0);
    expect(memoryAgeDays(NOW - DAY, NOW)).toBe(1);
    expect(memoryAgeDays(NOW - 2.9 * DAY, NOW)).toBe(2);
    expect(memoryAgeDays(NOW + 5 * DAY, NOW)).toBe(0);
    expect(memoryAgeDays(Number.NaN, NOW)).toBe(0);
  });

  it('labels today, yesterday and N days ago', () => {
    expect(memoryFreshnessLabel(NOW - 1000, NOW)).toBe('today');
    expect(memoryFreshnessLabel(NOW - DAY, NOW)).toBe('yesterday');
    expect(memoryFreshnessLabel(NOW - 2 * DAY, NOW)).toBe('2 days ago');
    expect(memoryFreshnessLabel(NOW - 40 * DAY, NOW)).toBe('40 days ago');
  });

  it('adds the verify-before-trusting caveat only after more than one day', () => {
    expect(memoryFreshnessCaveat(NOW, NOW)).toBeUndefined();
    expect(memoryFreshnessCaveat(NOW - DAY, NOW)).toBeUndefined();
    const caveat = memoryFreshnessCaveat(NOW - 3 * DAY, NOW);
    expect(caveat).toMatch(/3 days ago/);
    expect(caveat).toMatch(/file:line/);
    expect(caveat).toMatch(/Check them against the current code/);
  });

  it('builds the header a recalled memory is shown under', () => {
    expect(recalledMemoryHeader('/m/a.md', NOW - 1000, NOW)).toBe('Memory (saved today): /m/a.md:');
    expect(recalledMemoryHeader('/m/a.md', NOW - DAY, NOW)).toBe('Memory (saved yesterday): /m/a.md:');
    expect(recalledMemoryHeader('/m/a.md', NOW - 9 * DAY, NOW)).toMatch(
      /9 days ago[\s\S]*\n\nMemory: \/m\/a\.md:$/,
    );
  });
});
