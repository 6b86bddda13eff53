import { describe, expect, it } from 'vitest';
import { assessSessionMemoryUpdate } from './guard.js';
import { DEFAULT_SESSION_MEMORY_TEMPLATE as T } from './template.js';

const real = T.replace(
  '# Current State\n_What is being worked on right now; tasks still pending; the immediate next steps_\n',
  '# Current State\n_What is being worked on right now; tasks still pending; the immediate next steps_\nFixing flaky test in src/a.ts\n',
);

describe('assessSessionMemoryUpdate', () => {
  it('accepts an update that keeps every header', () => {
    expect(real).not.toBe(T);
    expect(assessSessionMemoryUpdate({ before: T, after: real, template: T })).toEqual({ ok: true });
    expect(assessSessionMemoryUpdate({ before: real, after: `${real}more\n`, template: T })).toEqual({
      ok: true,
    });
  });

  it('rejects an empty or whitespace-only result', () => {
    expect(assessSessionMemoryUpdate({ before: real, after: ' \n\n', template: T })).toMatchObject({
      ok: false,
      reason: 'empty',
    });
    expect(assessSessionMemoryUpdate({ before: T, after: '', template: T })).toMatchObject({
      ok: false,
      reason: 'empty',
    });
  });

  it('rejects a reset to the bare template over real notes, but not a template left untouched', () => {
    expect(assessSessionMemoryUpdate({ before: real, after: `${T}\n`, template: T })).toMatchObject({
      ok: false,
      reason: 'template_only',
    });
    expect(assessSessionMemoryUpdate({ before: T, after: T, template: T })).toEqual({ ok: true });
  });

  it('rejects a result that lost a section header, naming it', () => {
    const after = real.replace('# Learnings\n', '');
    expect(assessSessionMemoryUpdate({ before: real, after, template: T })).toEqual({
      ok: false,
      reason: 'lost_headers',
      missingHeaders: ['# Learnings'],
      message: expect.stringContaining('"# Learnings"'),
    });
  });

  it('rejects a rename of a header (the old one is lost)', () => {
    const after = real.replace('# Worklog', '# Log');
    expect(assessSessionMemoryUpdate({ before: real, after, template: T })).toMatchObject({
      reason: 'lost_headers',
      missingHeaders: ['# Worklog'],
    });
  });
});
