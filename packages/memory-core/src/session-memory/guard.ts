import { isTemplateOnly, sectionHeaders } from './template.js';

// What a session-memory fork may not commit (docs/design.md §5): a summary that is empty, that went back to the bare
// template while real notes existed, or that lost a section header. The worker restores the old file and
// fails the job with the reason instead.

export type SessionMemoryGuardReason = 'empty' | 'template_only' | 'lost_headers';

export type SessionMemoryGuardVerdict =
  | { ok: true }
  | { ok: false; reason: SessionMemoryGuardReason; message: string; missingHeaders?: string[] };

export interface SessionMemoryGuardInput {
  /** The notes before the fork ran. */
  before: string;
  /** The notes after the fork ran. */
  after: string;
  template: string;
}

export function assessSessionMemoryUpdate(input: SessionMemoryGuardInput): SessionMemoryGuardVerdict {
  const { before, after, template } = input;
  if (after.trim().length === 0) {
    return {
      ok: false,
      reason: 'empty',
      message: 'The update left the session notes empty; the previous notes were kept.',
    };
  }
  if (isTemplateOnly(after, template) && !isTemplateOnly(before, template)) {
    return {
      ok: false,
      reason: 'template_only',
      message: 'The update replaced real session notes with the bare template; the previous notes were kept.',
    };
  }
  const kept = new Set(sectionHeaders(after));
  const missingHeaders = [...new Set(sectionHeaders(before))].filter((h) => !kept.has(h));
  if (missingHeaders.length > 0) {
    return {
      ok: false,
      reason: 'lost_headers',
      message: `The update removed section header(s) ${missingHeaders.map((h) => JSON.stringify(h)).join(', ')}; the previous notes were kept.`,
      missingHeaders,
    };
  }
  return { ok: true };
}
