import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chainEntrySchema, createUserEntry, isValidEntryShape, transcriptEntrySchema } from './entry.js';

// The read path validates with a hand-written check for speed; it must agree with the zod schema.

const anyValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.string({ maxLength: 3 }),
  fc.constant([]),
  fc.constant({}),
);
/** Mostly valid values, sometimes anything: so both verdicts are common. */
const field = <T>(good: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: good, weight: 30 }, { arbitrary: anyValue, weight: 1 });
const block = field(fc.record({ type: field(fc.constantFrom('text', 'tool_use')) }));
const message = fc.oneof(
  {
    weight: 30,
    arbitrary: fc.record(
      {
        role: fc.constantFrom('user', 'assistant', 'system'),
        content: fc.oneof(fc.string(), fc.array(block, { maxLength: 3 }), anyValue),
        extra: anyValue,
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: anyValue },
);
const entry = fc.record(
  {
    type: field(fc.constantFrom('user', 'assistant', 'system', 'summary')),
    uuid: field(fc.constantFrom('u1', 'abc')),
    parentUuid: field(fc.constantFrom('p1')),
    logicalParentUuid: field(fc.constantFrom('p0')),
    sessionId: field(fc.constant('s')),
    cwd: field(fc.constant('/x')),
    timestamp: field(fc.constant('2025-01-01T00:00:00.000Z')),
    isMeta: field(fc.boolean()),
    isCompactSummary: field(fc.boolean()),
    isSidechain: field(fc.boolean()),
    isVisibleInTranscriptOnly: field(fc.boolean()),
    subtype: field(fc.constant('compact_boundary')),
    message,
    unknownField: anyValue,
  },
  { requiredKeys: [] },
);

/** JSON has no `undefined`: drop such keys, as a JSONL line would. */
const asJson = (v: unknown) => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

describe('isValidEntryShape', () => {
  it('accepts exactly what transcriptEntrySchema accepts', () => {
    const verdicts = { accepted: 0, rejected: 0 };
    fc.assert(
      fc.property(fc.oneof(entry, anyValue), (raw) => {
        const value = asJson(raw);
        const expected = transcriptEntrySchema.safeParse(value).success;
        verdicts[expected ? 'accepted' : 'rejected']++;
        expect(isValidEntryShape(value)).toBe(expected);
      }),
      { numRuns: 3_000, seed: 42 },
    );
    // The generator reaches both sides of the rule.
    expect(verdicts.accepted).toBeGreaterThan(50);
    expect(verdicts.rejected).toBeGreaterThan(50);
  });

  it('accepts the entries this runtime writes', () => {
    const e = createUserEntry({ sessionId: 's', cwd: '/x', parentUuid: null }, 'hello');
    expect(isValidEntryShape(asJson(e))).toBe(true);
    expect(chainEntrySchema.safeParse(e).success).toBe(true);
  });
});
