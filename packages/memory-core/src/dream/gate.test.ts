import { describe, expect, it, vi } from 'vitest';
import {
  DREAM_MIN_HOURS,
  DREAM_MIN_SESSIONS,
  evaluateDreamGate,
  resolveDreamThresholds,
  runDreamGate,
  SESSION_SCAN_INTERVAL_MS,
} from './gate.js';

const H = 3_600_000;
const NOW = Date.parse('2026-11-30T12:00:00Z');
const open = { scanThrottleAcquired: true, sessionsTouched: 5 };

describe('evaluateDreamGate', () => {
  it('has the reference defaults', () => {
    expect(DREAM_MIN_HOURS).toBe(24);
    expect(DREAM_MIN_SESSIONS).toBe(5);
    expect(SESSION_SCAN_INTERVAL_MS).toBe(600_000);
  });

  it('blocks at 23h59 and opens at exactly 24h', () => {
    const at2359 = evaluateDreamGate({ nowMs: NOW, lastConsolidatedAtMs: NOW - (24 * H - 60_000), ...open });
    expect(at2359).toMatchObject({ open: false, blockedBy: 'time' });
    expect(at2359.hoursSince).toBeCloseTo(23 + 59 / 60, 6);
    const at24 = evaluateDreamGate({ nowMs: NOW, lastConsolidatedAtMs: NOW - 24 * H, ...open });
    expect(at24).toEqual({ open: true, hoursSince: 24, sessionCount: 5 });
  });

  it('blocks at 4 sessions and opens at 5', () => {
    const base = { nowMs: NOW, lastConsolidatedAtMs: NOW - 48 * H, scanThrottleAcquired: true };
    expect(evaluateDreamGate({ ...base, sessionsTouched: 4 })).toEqual({
      open: false,
      blockedBy: 'sessions',
      hoursSince: 48,
      sessionCount: 4,
    });
    expect(evaluateDreamGate({ ...base, sessionsTouched: 5 }).open).toBe(true);
  });

  it('blocks on the scan throttle after the time gate passed, before counting sessions', () => {
    const r = evaluateDreamGate({
      nowMs: NOW,
      lastConsolidatedAtMs: NOW - 48 * H,
      scanThrottleAcquired: false,
      sessionsTouched: 50,
    });
    expect(r).toEqual({ open: false, blockedBy: 'throttle', hoursSince: 48, sessionCount: 0 });
  });

  it('checks time first: a recent consolidation blocks on time even when the throttle was lost', () => {
    const r = evaluateDreamGate({
      nowMs: NOW,
      lastConsolidatedAtMs: NOW - H,
      scanThrottleAcquired: false,
      sessionsTouched: 0,
    });
    expect(r.blockedBy).toBe('time');
  });

  it('treats a project never consolidated as due on time', () => {
    expect(evaluateDreamGate({ nowMs: NOW, lastConsolidatedAtMs: undefined, ...open }).open).toBe(true);
    expect(evaluateDreamGate({ nowMs: NOW, lastConsolidatedAtMs: 0, ...open }).open).toBe(true);
  });

  it('honours configured thresholds and falls back to the defaults for invalid ones', () => {
    const base = { nowMs: NOW, lastConsolidatedAtMs: NOW - 2 * H, ...open, sessionsTouched: 2 };
    expect(evaluateDreamGate({ ...base, minHours: 1, minSessions: 2 }).open).toBe(true);
    expect(evaluateDreamGate({ ...base, minHours: 3 }).blockedBy).toBe('time');
    expect(resolveDreamThresholds({ minHours: -1, minSessions: Number.NaN })).toEqual({
      minHours: 24,
      minSessions: 5,
    });
    expect(resolveDreamThresholds({ minHours: Number.POSITIVE_INFINITY, minSessions: 0 })).toEqual({
      minHours: 24,
      minSessions: 5,
    });
  });
});

describe('runDreamGate', () => {
  it('never claims the throttle or scans when the time gate blocks', async () => {
    const acquireScanThrottle = vi.fn(async () => true);
    const countSessionsTouched = vi.fn(async () => 9);
    const r = await runDreamGate({
      nowMs: NOW,
      lastConsolidatedAtMs: NOW - H,
      acquireScanThrottle,
      countSessionsTouched,
    });
    expect(r.blockedBy).toBe('time');
    expect(acquireScanThrottle).not.toHaveBeenCalled();
    expect(countSessionsTouched).not.toHaveBeenCalled();
  });

  it('does not scan when another replica holds the throttle', async () => {
    const countSessionsTouched = vi.fn(async () => 9);
    const r = await runDreamGate({
      nowMs: NOW,
      lastConsolidatedAtMs: NOW - 30 * H,
      acquireScanThrottle: async () => false,
      countSessionsTouched,
    });
    expect(r).toMatchObject({ open: false, blockedBy: 'throttle' });
    expect(countSessionsTouched).not.toHaveBeenCalled();
  });

  it('opens with enough sessions and reports the count', async () => {
    const r = await runDreamGate({
      nowMs: NOW,
      lastConsolidatedAtMs: NOW - 30 * H,
      acquireScanThrottle: async () => true,
      countSessionsTouched: async () => 7,
    });
    expect(r).toEqual({ open: true, hoursSince: 30, sessionCount: 7 });
    const shut = await runDreamGate({
      nowMs: NOW,
      lastConsolidatedAtMs: NOW - 30 * H,
      acquireScanThrottle: async () => true,
      countSessionsTouched: async () => 4,
    });
    expect(shut).toMatchObject({ open: false, blockedBy: 'sessions', sessionCount: 4 });
  });
});
