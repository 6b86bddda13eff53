import { describe, expect, it } from 'vitest';
import {
  autoCompactThreshold,
  blockingLimit,
  contextWarningState,
  effectiveContextWindow,
  MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES,
} from './thresholds.js';

describe('compaction thresholds', () => {
  it('is (window − min(max output, 20,000)) − 13,000', () => {
    expect(autoCompactThreshold({ contextWindow: 200_000, maxOutputTokens: 32_000 })).toBe(167_000);
    expect(autoCompactThreshold({ contextWindow: 200_000, maxOutputTokens: 8_192 })).toBe(178_808);
    expect(effectiveContextWindow({ contextWindow: 200_000, maxOutputTokens: 8_192 })).toBe(191_808);
    expect(blockingLimit({ contextWindow: 200_000, maxOutputTokens: 32_000 })).toBe(177_000);
    expect(MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES).toBe(3);
  });

  it('warns 20,000 tokens below the threshold and flags auto-compaction at it', () => {
    const limits = { contextWindow: 200_000, maxOutputTokens: 32_000 };
    expect(contextWarningState(146_999, limits)).toMatchObject({
      aboveWarning: false,
      aboveAutoCompact: false,
    });
    expect(contextWarningState(147_000, limits)).toMatchObject({
      aboveWarning: true,
      aboveAutoCompact: false,
    });
    expect(contextWarningState(167_000, limits)).toMatchObject({
      aboveAutoCompact: true,
      atBlockingLimit: false,
      percentLeft: 0,
    });
    expect(contextWarningState(177_000, limits).atBlockingLimit).toBe(true);
    expect(contextWarningState(83_500, limits).percentLeft).toBe(50);
    expect(contextWarningState(170_000, limits, { autoCompactEnabled: false }).aboveAutoCompact).toBe(false);
  });
});
