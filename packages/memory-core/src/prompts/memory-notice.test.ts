import { describe, expect, it } from 'vitest';
import {
  formatMemoryNotice,
  MAX_NOTICE_FILES,
  MEMORY_NOTICE_ATTACHMENT_KIND,
  memoryUpdateAttachment,
  unannouncedMemoryChanges,
} from './memory-notice.js';

const saved = (memories: Array<{ path: string; action: string }>) => ({
  type: 'system',
  subtype: 'memory_saved',
  memories,
});

describe('memory change notice', () => {
  it('names the files changed since the model last replied, each once', () => {
    const entries = [
      saved([{ path: 'old.md', action: 'created' }]),
      { type: 'assistant' },
      saved([{ path: 'testing.md', action: 'created' }]),
      saved([
        { path: 'testing.md', action: 'updated' },
        { path: 'team/db.md', action: 'updated' },
      ]),
      { type: 'user' },
    ];
    expect(unannouncedMemoryChanges(entries)).toEqual([
      { path: 'testing.md', action: 'created' },
      { path: 'team/db.md', action: 'updated' },
    ]);
    expect(formatMemoryNotice(unannouncedMemoryChanges(entries))).toBe(
      "<system-reminder>\nEngram's background memory work changed these memory files since your last reply: " +
        'testing.md (created), team/db.md (updated). They are already saved — do not write them again; read one ' +
        'before you change or contradict it.\n</system-reminder>',
    );
  });

  it('announces once: an earlier notice stops the walk', () => {
    const entries = [
      saved([{ path: 'a.md', action: 'created' }]),
      { type: 'attachment', attachmentKind: MEMORY_NOTICE_ATTACHMENT_KIND },
      { type: 'user' },
    ];
    expect(unannouncedMemoryChanges(entries)).toEqual([]);
    expect(formatMemoryNotice([])).toBeUndefined();
  });

  it('caps the list and counts the rest; ignores malformed records', () => {
    const many = Array.from({ length: MAX_NOTICE_FILES + 3 }, (_, i) => ({
      path: `m${i}.md`,
      action: 'created',
    }));
    const changes = unannouncedMemoryChanges([
      saved(many),
      { type: 'system', subtype: 'memory_saved', memories: [{ nope: 1 }, 'x'] },
    ]);
    expect(changes).toHaveLength(MAX_NOTICE_FILES + 3);
    expect(formatMemoryNotice(changes)).toContain(', and 3 more.');
  });

  it("records the notice as Claude Code's memory_update attachment: summary, absolute paths", () => {
    const dir = '/home/dev/.claude/projects/-repo/memory';
    expect(memoryUpdateAttachment([{ path: 'feedback_pnpm.md', action: 'created' }], dir)).toEqual({
      type: 'memory_update',
      source: 'extract',
      summary: 'saved 1 memory',
      paths: [`${dir}/feedback_pnpm.md`],
      inContextPaths: [],
    });
    expect(
      memoryUpdateAttachment(
        [
          { path: 'a.md', action: 'created' },
          { path: 'team/b.md', action: 'updated' },
        ],
        dir,
      ).summary,
    ).toBe('changed 2 memories');
    expect(memoryUpdateAttachment([{ path: 'a.md', action: 'updated' }], dir).summary).toBe(
      'updated 1 memory',
    );
  });

  it('a memory_update attachment Claude Code wrote also marks the changes before it as told', () => {
    const ccNotice = { type: 'attachment', attachment: { type: 'memory_update', summary: 'saved 1 memory' } };
    expect(unannouncedMemoryChanges([saved([{ path: 'a.md', action: 'created' }]), ccNotice])).toEqual([]);
    expect(unannouncedMemoryChanges([ccNotice, saved([{ path: 'b.md', action: 'created' }])])).toEqual([
      { path: 'b.md', action: 'created' },
    ]);
  });
});
