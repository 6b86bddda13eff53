import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  DEFAULT_SESSION_MEMORY_TEMPLATE,
  isTemplateOnly,
  loadSessionMemoryTemplate,
  SessionMemoryConfigError,
  sectionHeaders,
  splitSections,
} from './template.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('the default template', () => {
  it('has the ten reference sections, each followed by an italic description line', () => {
    expect(sectionHeaders(DEFAULT_SESSION_MEMORY_TEMPLATE)).toEqual([
      '# Session Title',
      '# Current State',
      '# Task specification',
      '# Files and Functions',
      '# Workflow',
      '# Errors & Corrections',
      '# Codebase and System Documentation',
      '# Learnings',
      '# Key results',
      '# Worklog',
    ]);
    for (const section of splitSections(DEFAULT_SESSION_MEMORY_TEMPLATE)) {
      expect(section.body.split('\n')[0]).toMatch(/^_[^_].*_$/);
    }
  });
});

describe('loadSessionMemoryTemplate', () => {
  it('uses a custom template file when present, else the default', async () => {
    const { dir, cleanup } = makeTempDir();
    cleanups.push(cleanup);
    const custom = join(dir, 'template.md');
    expect(await loadSessionMemoryTemplate(custom)).toBe(DEFAULT_SESSION_MEMORY_TEMPLATE);
    expect(await loadSessionMemoryTemplate()).toBe(DEFAULT_SESSION_MEMORY_TEMPLATE);
    writeFileSync(custom, '# Goal\n_why we are here_\n');
    expect(await loadSessionMemoryTemplate(custom)).toBe('# Goal\n_why we are here_\n');
  });

  it('refuses a blank or unreadable custom template with a typed error', async () => {
    const { dir, cleanup } = makeTempDir();
    cleanups.push(cleanup);
    const custom = join(dir, 'template.md');
    writeFileSync(custom, '  \n');
    await expect(loadSessionMemoryTemplate(custom)).rejects.toMatchObject({
      code: 'SESSION_MEMORY_EMPTY_TEMPLATE',
    });
    writeFileSync(custom, '# A\n');
    chmodSync(custom, 0o000);
    if (process.getuid?.() !== 0) {
      await expect(loadSessionMemoryTemplate(custom)).rejects.toBeInstanceOf(SessionMemoryConfigError);
    }
    chmodSync(custom, 0o600);
  });
});

describe('isTemplateOnly and sectionHeaders', () => {
  it('treats whitespace-only differences from the template as untouched', () => {
    expect(isTemplateOnly(`\n${DEFAULT_SESSION_MEMORY_TEMPLATE}\n\n`, DEFAULT_SESSION_MEMORY_TEMPLATE)).toBe(
      true,
    );
    expect(
      isTemplateOnly(
        DEFAULT_SESSION_MEMORY_TEMPLATE.replace('# Worklog\n', '# Worklog\n- ran tests\n'),
        DEFAULT_SESSION_MEMORY_TEMPLATE,
      ),
    ).toBe(false);
  });

  it('ignores # lines inside fenced code and ## subheadings', () => {
    const notes = '# A\n_a_\n```sh\n# not a header\n```\n## sub\n# B\n';
    expect(sectionHeaders(notes)).toEqual(['# A', '# B']);
  });

  it('splits into sections that join back to the original text', () => {
    const notes = 'preamble\n# A\n_a_\nbody\n# B\n_b_\n';
    const sections = splitSections(notes);
    expect(sections.map((s) => s.header)).toEqual(['', '# A', '# B']);
    expect(sections.flatMap((s) => (s.header ? [s.header, s.body] : [s.body])).join('\n')).toBe(notes);
  });
});
