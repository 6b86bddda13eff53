import { describe, expect, it } from 'vitest';
import { formatMemoryManifest } from '../memdir/scan.js';
import { REALISTIC_HEADERS } from './recall-fixtures.test-helpers.js';
import {
  type MemorySelector,
  normalizeMemoryRelPath,
  SelectorOutputError,
  type SelectorRequest,
  selectRelevantMemories,
} from './select.js';
import {
  MEMORY_SELECTION_SYSTEM_PROMPT,
  SELECTION_OUTPUT_JSON_SCHEMA,
  SELECTOR_MAX_TOKENS,
} from './selection-prompt.js';

function recordingSelector(answer: unknown | ((r: SelectorRequest) => unknown)) {
  const requests: SelectorRequest[] = [];
  const selector: MemorySelector = async (request) => {
    requests.push(request);
    return typeof answer === 'function' ? (answer as (r: SelectorRequest) => unknown)(request) : answer;
  };
  return { selector, requests };
}

const base = { headers: REALISTIC_HEADERS, recentTools: [] as string[] };

describe('selectRelevantMemories', () => {
  it('asks with the selection prompt, the query, the manifest minus surfaced and read files, and the recent tools', async () => {
    const { selector, requests } = recordingSelector({ selected_memories: ['feedback_db_tests.md'] });
    const result = await selectRelevantMemories({
      ...base,
      query: 'should the integration tests mock the database?',
      alreadySurfaced: ['feedback_pnpm.md'],
      alreadyRead: ['./team/deploy.md'],
      recentTools: ['Bash', 'Read'],
      selector,
    });
    expect(result).toMatchObject({ outcome: 'model', unknownPicks: [] });
    expect(result.selected.map((h) => h.filename)).toEqual(['feedback_db_tests.md']);
    expect(requests).toHaveLength(1);
    const request = requests[0]!;
    expect(request.system).toBe(MEMORY_SELECTION_SYSTEM_PROMPT);
    expect(request.schema).toEqual(SELECTION_OUTPUT_JSON_SCHEMA);
    expect(request.maxTokens).toBe(SELECTOR_MAX_TOKENS);
    const offered = REALISTIC_HEADERS.filter(
      (h) => h.filename !== 'feedback_pnpm.md' && h.filename !== 'team/deploy.md',
    );
    expect(request.user).toBe(
      `Query: should the integration tests mock the database?\n\nAvailable memories:\n${formatMemoryManifest(offered)}\n\nRecently used tools: Bash, Read`,
    );
    expect(request.user).not.toContain('feedback_pnpm.md');
    expect(request.user).not.toContain('team/deploy.md');
    expect(result.candidates).toHaveLength(REALISTIC_HEADERS.length - 2);
  });

  it('ignores picks that were not in the manifest, including surfaced files and traversal', async () => {
    const { selector } = recordingSelector({
      selected_memories: [
        '../../etc/passwd.md',
        'feedback_pnpm.md',
        'user_role.md',
        'invented.md',
        'user_role.md',
      ],
    });
    const result = await selectRelevantMemories({
      ...base,
      query: 'explain this React hook',
      alreadySurfaced: ['feedback_pnpm.md'],
      selector,
    });
    expect(result.outcome).toBe('model');
    expect(result.selected.map((h) => h.filename)).toEqual(['user_role.md']);
    expect(result.unknownPicks).toEqual(['../../etc/passwd.md', 'feedback_pnpm.md', 'invented.md']);
  });

  it('keeps at most five picks, in the order given', async () => {
    const picks = REALISTIC_HEADERS.slice(0, 8)
      .map((h) => h.filename)
      .reverse();
    const { selector } = recordingSelector({ selected_memories: picks });
    const result = await selectRelevantMemories({ ...base, query: 'everything please', selector });
    expect(result.selected.map((h) => h.filename)).toEqual(picks.slice(0, 5));
  });

  it('accepts an empty selection as the model outcome', async () => {
    const { selector } = recordingSelector({ selected_memories: [] });
    const result = await selectRelevantMemories({ ...base, query: 'the capital of France', selector });
    expect(result).toMatchObject({ outcome: 'model', selected: [] });
  });

  it('does not ask at all when every memory is already surfaced or read', async () => {
    const { selector, requests } = recordingSelector({ selected_memories: [] });
    const result = await selectRelevantMemories({
      ...base,
      query: 'anything at all',
      alreadySurfaced: REALISTIC_HEADERS.slice(0, 6).map((h) => h.filename),
      alreadyRead: REALISTIC_HEADERS.slice(6).map((h) => h.filename),
      selector,
    });
    expect(result).toMatchObject({ outcome: 'empty', selected: [] });
    expect(requests).toHaveLength(0);
  });

  it('falls back to the lexical ranking when the selector does not answer in time, and aborts it', async () => {
    let seenSignal: AbortSignal | undefined;
    const selector: MemorySelector = (request) => {
      seenSignal = request.signal;
      return new Promise(() => {}); // never answers
    };
    const related = await selectRelevantMemories({
      ...base,
      query: 'should I mock the database in integration tests',
      selector,
      timeoutMs: 20,
    });
    expect(related).toMatchObject({ outcome: 'fallback', fallbackReason: 'timeout' });
    expect(related.selected[0]?.filename).toBe('feedback_db_tests.md');
    expect(seenSignal?.aborted).toBe(true);

    const unrelated = await selectRelevantMemories({
      ...base,
      query: 'what is the capital of France',
      selector,
      timeoutMs: 20,
    });
    expect(unrelated).toMatchObject({ outcome: 'fallback', fallbackReason: 'timeout', selected: [] });
  });

  it('falls back when the selector throws', async () => {
    const selector: MemorySelector = async () => {
      throw new Error('529 overloaded');
    };
    const result = await selectRelevantMemories({ ...base, query: 'pnpm or npm for installs', selector });
    expect(result).toMatchObject({
      outcome: 'fallback',
      fallbackReason: 'selector-error',
      fallbackDetail: '529 overloaded',
    });
    expect(result.selected.map((h) => h.filename)).toEqual(['feedback_pnpm.md']);
  });

  it('falls back on output that is not JSON or does not match the schema', async () => {
    const notJson: MemorySelector = async () => {
      throw new SelectorOutputError('reply is not JSON');
    };
    for (const [selector, detail] of [
      [notJson, 'reply is not JSON'],
      [async () => ({ selected: ['feedback_pnpm.md'] }), 'selected_memories'],
      [async () => ({ selected_memories: 'feedback_pnpm.md' }), 'selected_memories'],
      [async () => ({ selected_memories: [], extra: 1 }), 'extra'],
      [async () => null, '(root)'],
    ] as Array<[MemorySelector, string]>) {
      const result = await selectRelevantMemories({ ...base, query: 'pnpm or npm for installs', selector });
      expect(result).toMatchObject({ outcome: 'fallback', fallbackReason: 'invalid-output' });
      expect(result.fallbackDetail).toContain(detail);
      expect(result.selected.map((h) => h.filename)).toEqual(['feedback_pnpm.md']);
    }
  });

  it('rejects with the abort reason when the caller aborts, without falling back', async () => {
    const controller = new AbortController();
    const selector: MemorySelector = () => new Promise(() => {});
    const pending = selectRelevantMemories({
      ...base,
      query: 'pnpm or npm',
      selector,
      timeoutMs: 5_000,
      signal: controller.signal,
    });
    controller.abort(new Error('job cancelled'));
    await expect(pending).rejects.toThrow('job cancelled');
  });
});

describe('normalizeMemoryRelPath', () => {
  it('compares paths in one form', () => {
    expect(normalizeMemoryRelPath('./team//deploy.md')).toBe('team/deploy.md');
    expect(normalizeMemoryRelPath('cafe\u0301.md')).toBe('caf\u00e9.md');
  });
});
