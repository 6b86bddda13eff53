import { describe, expect, it } from 'vitest';
import type { MemoryStoreApiError } from './errors.js';
import {
  listMemoriesQuery,
  listStoresQuery,
  listVersionsQuery,
  memoryCreateBody,
  memoryUpdateBody,
  parseWire,
  queryObject,
  storeCreateBody,
  storeUpdateBody,
} from './schemas.js';

// The wire schemas are the one definition of what the Memory Stores API accepts: each refusal is the status,
// the Anthropic error type and the message naming the field and its rule (the conformance suite drives the
// same through the SDK against a running server).

function refusal(schema: Parameters<typeof parseWire>[0], input: unknown): string {
  try {
    parseWire(schema, input);
  } catch (error) {
    const e = error as MemoryStoreApiError;
    return `${e.status} ${e.type}: ${e.message}`;
  }
  return 'accepted';
}

const sha = 'a'.repeat(64);

describe('the Memory Stores wire schemas', () => {
  it('refuse bad bodies with the status and the message naming the rule', () => {
    const cases: Array<[Parameters<typeof parseWire>[0], unknown, string]> = [
      [storeCreateBody, { name: '' }, '400 invalid_request_error: name: must be 1 to 255 characters.'],
      [
        storeCreateBody,
        { name: 'x'.repeat(256) },
        '400 invalid_request_error: name: must be 1 to 255 characters.',
      ],
      [
        storeCreateBody,
        { name: 'a\u0001' },
        '400 invalid_request_error: name: cannot contain control characters.',
      ],
      [
        storeCreateBody,
        { name: 'ok', metadata: { k: 5 } },
        '400 invalid_request_error: metadata.k: must be a string of at most 512 characters.',
      ],
      [
        storeCreateBody,
        { name: 'ok', metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) },
        '400 invalid_request_error: metadata: more than the limit of 16 key-value pairs.',
      ],
      [
        storeCreateBody,
        { name: 'ok', metadata: [] },
        '400 invalid_request_error: metadata: must be an object.',
      ],
      [
        storeCreateBody,
        { name: 'ok', owner: 'x' },
        '400 invalid_request_error: owner: unknown field; allowed: name, description, metadata.',
      ],
      [
        storeUpdateBody,
        { description: 'x'.repeat(1025) },
        '400 invalid_request_error: description: exceeds the limit of 1024 characters.',
      ],
      [memoryCreateBody, { content: 'x' }, '400 invalid_request_error: path: must be a string.'],
      [
        memoryCreateBody,
        { path: 'rel.md', content: 'x' },
        '400 invalid_request_error: path: must start with "/".',
      ],
      [
        memoryCreateBody,
        { path: '/a/../b.md', content: 'x' },
        '400 invalid_request_error: path: a segment cannot be "." or "..".',
      ],
      [
        memoryCreateBody,
        { path: '/a.md', content: 'x'.repeat(102_401) },
        '413 request_too_large: content: 102401 bytes exceeds the limit of 102400 bytes per memory.',
      ],
      // An unknown field is named first: it explains a missing one.
      [
        memoryCreateBody,
        { content: 'x', pth: '/a.md' },
        '400 invalid_request_error: pth: unknown field; allowed: path, content, precondition.',
      ],
      [
        memoryCreateBody,
        { path: '/a.md', content: 'x', precondition: 5 },
        '400 invalid_request_error: precondition: must be an object.',
      ],
      [
        memoryCreateBody,
        { path: '/a.md', content: 'x', precondition: { type: 'newer_than' } },
        '400 invalid_request_error: precondition.type: "newer_than" is not supported.',
      ],
      [
        memoryCreateBody,
        { path: '/a.md', content: 'x', precondition: { type: 'content_sha256', content_sha256: 'AB' } },
        '400 invalid_request_error: precondition.content_sha256: must be 64 lowercase hexadecimal characters.',
      ],
      // `not_exists` is a create's precondition only.
      [
        memoryUpdateBody,
        { content: 'x', precondition: { type: 'not_exists' } },
        '400 invalid_request_error: precondition.type: "not_exists" is not supported.',
      ],
    ];
    for (const [schema, input, expected] of cases)
      expect(refusal(schema, input), JSON.stringify(input).slice(0, 80)).toBe(expected);
  });

  it('accept what the SDK and Claude Code send, with nulls meaning "unchanged"', () => {
    expect(
      parseWire(memoryCreateBody, { path: '/a.md', content: null, precondition: { type: 'not_exists' } }),
    ).toEqual({ path: '/a.md', content: null, precondition: { type: 'not_exists' } });
    expect(
      parseWire(memoryUpdateBody, {
        content: 'x',
        precondition: { type: 'content_sha256', content_sha256: sha },
      }),
    ).toEqual({ content: 'x', precondition: { type: 'content_sha256', content_sha256: sha } });
    expect(parseWire(storeUpdateBody, { name: null, metadata: { a: null, b: 'x' } })).toEqual({
      name: null,
      metadata: { a: null, b: 'x' },
    });
    expect(refusal(memoryCreateBody, { path: '/max.md', content: 'x'.repeat(102_400) })).toBe('accepted');
  });

  it('parse queries: defaults per route, the page-size limit of the view, and the list filters', () => {
    const q = (s: string) => queryObject(new URLSearchParams(s));
    expect(parseWire(listMemoriesQuery, q(''))).toEqual({ view: 'basic', path_prefix: '/', depth: 0 });
    expect(
      parseWire(listMemoriesQuery, q('view=full&limit=20&order_by=path&order=asc&depth=2')),
    ).toMatchObject({
      view: 'full',
      limit: 20,
      depth: 2,
    });
    expect(refusal(listMemoriesQuery, q('view=full&limit=21'))).toBe(
      '400 invalid_request_error: limit: 21 exceeds the page-size limit of 20 items for this view.',
    );
    expect(refusal(listMemoriesQuery, q('limit=101'))).toBe(
      '400 invalid_request_error: limit: 101 exceeds the page-size limit of 100 items for this view.',
    );
    expect(refusal(listMemoriesQuery, q('limit=0'))).toBe(
      '400 invalid_request_error: limit: must be a positive integer.',
    );
    expect(refusal(listMemoriesQuery, q('depth=21'))).toBe(
      '400 invalid_request_error: depth: must be an integer from 0 to 20.',
    );
    expect(refusal(listMemoriesQuery, q('path_prefix=/notes'))).toBe(
      '400 invalid_request_error: path_prefix: must end with "/".',
    );
    expect(refusal(listMemoriesQuery, q('order=desc'))).toBe(
      '400 invalid_request_error: order: only "asc" is supported.',
    );
    expect(refusal(listMemoriesQuery, q('page=not%20a%20cursor'))).toBe(
      '400 invalid_request_error: page: not a cursor this API returned.',
    );
    expect(parseWire(listStoresQuery, q('include_archived=true&limit=100'))).toMatchObject({
      include_archived: true,
      limit: 100,
    });
    expect(refusal(listStoresQuery, q('include_archived=yes'))).toBe(
      '400 invalid_request_error: include_archived: must be true or false.',
    );
    expect(refusal(listVersionsQuery, q('operation=renamed'))).toBe(
      '400 invalid_request_error: operation: must be created, modified or deleted.',
    );
    expect(refusal(listVersionsQuery, q('created_at[gte]=yesterday'))).toBe(
      '400 invalid_request_error: created_at[gte]: not an RFC 3339 time.',
    );
    // A repeated parameter counts once, by its first value (as URLSearchParams.get).
    expect(parseWire(listVersionsQuery, q('view=full&view=basic')).view).toBe('full');
  });
});
