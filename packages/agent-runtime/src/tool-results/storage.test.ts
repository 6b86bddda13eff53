import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import {
  applyToolResultBudget,
  buildPersistedOutputMessage,
  formatSize,
  generatePreview,
  PREVIEW_SIZE_CHARS,
  persistLargeToolResult,
  resultThreshold,
  ToolResultStorageError,
} from './storage.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await makeTempDir());
});
afterEach(() => cleanup());

describe('thresholds', () => {
  it('uses the per-tool table, clamps to 50,000 and never persists Read', () => {
    expect(resultThreshold('Bash')).toBe(30_000);
    expect(resultThreshold('Grep')).toBe(20_000);
    expect(resultThreshold('Read')).toBe(Number.POSITIVE_INFINITY);
    expect(resultThreshold('Read', Number.POSITIVE_INFINITY)).toBe(Number.POSITIVE_INFINITY);
    expect(resultThreshold('Edit', 100_000)).toBe(50_000);
    expect(resultThreshold('SomethingNew')).toBe(50_000);
  });
});

describe('generatePreview', () => {
  it('cuts at the last newline when it lies past half of the preview', () => {
    const text = `${'a'.repeat(1_500)}\n${'b'.repeat(1_000)}`;
    expect(generatePreview(text)).toEqual({ preview: 'a'.repeat(1_500), hasMore: true });
  });

  it('cuts at exactly 2,000 characters when the last newline is early', () => {
    const text = `${'a'.repeat(500)}\n${'b'.repeat(3_000)}`;
    const { preview, hasMore } = generatePreview(text);
    expect(preview).toHaveLength(PREVIEW_SIZE_CHARS);
    expect(hasMore).toBe(true);
  });

  it('keeps a short text whole', () => {
    expect(generatePreview('short\ntext')).toEqual({ preview: 'short\ntext', hasMore: false });
  });
});

describe('persistLargeToolResult', () => {
  it('writes the full output once and returns the <persisted-output> block', async () => {
    const content = `${'line\n'.repeat(12_000)}`;
    const first = await persistLargeToolResult({ toolUseId: 'toolu_abc', content, dir });
    expect(first.created).toBe(true);
    expect(first.path).toBe(join(dir, 'toolu_abc.txt'));
    expect(await readFile(first.path, 'utf8')).toBe(content);
    expect(first.replacement).toBe(
      buildPersistedOutputMessage(first.path, content.length, generatePreview(content).preview, true),
    );
    expect(first.replacement).toMatch(
      new RegExp(
        `^<persisted-output>\\nOutput too large \\(58.6KB\\)\\. Full output saved to: ${first.path}\\n\\nPreview \\(first 2KB\\):\\nline\\n`,
      ),
    );
    expect(first.replacement.endsWith('line\n...\n</persisted-output>')).toBe(true);
  });

  it('reuses an existing file, so a replay yields the same replacement', async () => {
    const content = 'x'.repeat(60_000);
    const a = await persistLargeToolResult({ toolUseId: 'toolu_same', content, dir });
    await writeFile(a.path, content); // unchanged content, as a replay would see it
    const b = await persistLargeToolResult({ toolUseId: 'toolu_same', content, dir });
    expect(b.created).toBe(false);
    expect(b.replacement).toBe(a.replacement);
  });

  it('persists all-text block arrays as JSON', async () => {
    const content = [{ type: 'text' as const, text: 'y'.repeat(60_000) }];
    const out = await persistLargeToolResult({ toolUseId: 'toolu_json', content, dir });
    expect(out.path).toBe(join(dir, 'toolu_json.json'));
    expect(JSON.parse(await readFile(out.path, 'utf8'))).toEqual(content);
  });

  it('refuses a tool_use_id that could escape the directory', async () => {
    await expect(
      persistLargeToolResult({ toolUseId: '../../etc/x', content: 'x', dir }),
    ).rejects.toBeInstanceOf(ToolResultStorageError);
  });
});

describe('applyToolResultBudget', () => {
  it('leaves results under the threshold alone and persists larger ones', async () => {
    expect(await applyToolResultBudget({ toolName: 'Bash', toolUseId: 't1', content: 'ok', dir })).toEqual({
      content: 'ok',
    });
    const big = 'z'.repeat(30_001);
    const out = await applyToolResultBudget({ toolName: 'Bash', toolUseId: 't2', content: big, dir });
    expect(out.persisted?.path).toBe(join(dir, 't2.txt'));
    expect(String(out.content)).toMatch(/^<persisted-output>/);
  });

  it('never persists Read output or images', async () => {
    const huge = 'r'.repeat(500_000);
    expect(
      (await applyToolResultBudget({ toolName: 'Read', toolUseId: 't3', content: huge, dir })).content,
    ).toBe(huge);
    const image = [
      {
        type: 'image' as const,
        source: { type: 'base64', media_type: 'image/png', data: 'x'.repeat(90_000) },
      },
    ];
    expect(
      (await applyToolResultBudget({ toolName: 'Other', toolUseId: 't4', content: image, dir })).content,
    ).toBe(image);
  });

  it('truncates in place when no directory is configured', async () => {
    const out = await applyToolResultBudget({
      toolName: 'Grep',
      toolUseId: 't5',
      content: 'g'.repeat(25_000),
    });
    expect(String(out.content)).toMatch(
      /^g{20000}\n\n\[Output truncated: 24.4KB total, first 20000 characters shown\]$/,
    );
  });

  it('formats sizes like Claude Code', () => {
    expect(formatSize(900)).toBe('900 bytes');
    expect(formatSize(2048)).toBe('2KB');
    expect(formatSize(3 * 1024 * 1024)).toBe('3MB');
  });
});
