import { MAX_ENTRYPOINT_CHARS, MAX_ENTRYPOINT_LINES, MAX_INDEX_LINE_CHARS } from '../memdir/index-file.js';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';

// The instruction for the consolidation ("dream") fork: our own wording of the reference's four phases
// (docs/claude-code-memory.md §8.17–21) — orient, gather recent signal, consolidate, prune and re-index — plus the
// things Engram adds: how to delete a memory when the tools cannot remove files (empty it; the worker deletes
// emptied files after the safety check), a `merged_from` hint that tells the safety check where an absorbed
// file's content went, and the guardrails the run is judged by. A snapshot test pins the full text.

/** Session ids listed in the prompt at most; the rest are summarised as a count. */
export const MAX_PROMPT_SESSIONS = 100;

/** Marker the workers' tests (and logs) use to recognise a consolidation request. */
export const CONSOLIDATION_PROMPT_TITLE = '# Dream: memory consolidation';

export interface ConsolidationPromptOptions {
  memoryDir: string;
  /** Per-cwd transcript directory holding `<sessionId>.jsonl` files. */
  transcriptDir: string;
  /** Sessions touched since the last consolidation, newest first. */
  sessionIds: readonly string[];
  /** Start of the last consolidation (Date, epoch ms or ISO string); absent when there was none. */
  lastConsolidatedAt?: Date | number | string;
  /** formatMemoryManifest(...) output, to save the orient phase a listing; optional. */
  manifest?: string;
  /** Share of memories the run may delete without folding their content elsewhere (default 0.5). */
  maxDeletedShare?: number;
}

function isoDate(value: Date | number | string | undefined): string | undefined {
  if (value === undefined || value === 0) return undefined;
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

export function buildConsolidationPrompt(opts: ConsolidationPromptOptions): string {
  const last = isoDate(opts.lastConsolidatedAt);
  const share = Math.round((opts.maxDeletedShare ?? 0.5) * 100);
  const sessions = opts.sessionIds.slice(0, MAX_PROMPT_SESSIONS);
  const more = opts.sessionIds.length - sessions.length;
  const sessionList =
    sessions.length === 0
      ? '(none recorded — rely on the memory files themselves and on drift against the current code)'
      : [
          ...sessions.map((id) => `- ${id}`),
          ...(more > 0 ? [`- … and ${more} more (older)`] : []),
          '',
          `Each one's transcript is \`${opts.transcriptDir}/<session id>.jsonl\`.`,
        ].join('\n');

  const parts = [
    [
      CONSOLIDATION_PROMPT_TITLE,
      '',
      'You are running a consolidation pass over your persistent memory: fold what recent sessions taught you ' +
        'into durable, well-organised memories, so that future sessions start from an accurate and compact ' +
        'picture instead of a pile of overlapping notes.',
      '',
      `- Memory directory: \`${opts.memoryDir}\` (it already exists).`,
      `- Session transcripts: \`${opts.transcriptDir}\` — one JSONL file per session. They are large: search ` +
        'them narrowly (Grep with a specific pattern, limited output); never read one from start to end.',
      `- Last consolidation: ${last ?? 'never'}.`,
    ].join('\n'),
    [
      '## Phase 1 — Orient',
      '',
      `- List the memory directory and read \`${ENTRYPOINT_NAME}\`.`,
      '- Skim the existing topic files, so that you improve them rather than write duplicates.',
      '- If there is a `logs/` or `sessions/` subdirectory, look at its recent entries.',
    ].join('\n'),
    [
      '## Phase 2 — Gather recent signal',
      '',
      'Look for what is worth keeping, in this order:',
      '1. Daily logs (`logs/`), if there are any.',
      '2. Memories that drifted: statements that the current code or a later session contradicts.',
      '3. The transcripts of the sessions listed below: narrow searches for things you already suspect ' +
        'matter (a preference the user repeated, a decision, a correction, a surprise), looking at the most ' +
        'recent matches only. Do not read transcripts exhaustively.',
    ].join('\n'),
    [
      '## Phase 3 — Consolidate',
      '',
      '- Write or update topic files following your memory conventions: frontmatter with `name` (a short ' +
        'kebab-case slug), a specific one-line quoted `description` and `metadata.type`; feedback and project ' +
        'memories lead with the rule or fact, then **Why:** and **How to apply:** lines. Memories link to each ' +
        'other as `[[slug]]`; after the run, links to a memory you renamed, merged or deleted are rewritten to ' +
        'its successor (or turned into plain text), so you need not chase them.',
      '- Merge new information into the file that already covers the topic instead of adding a near-duplicate. ' +
        'When two files say the same thing, keep one, fold the other’s content into it, and record the absorbed ' +
        'file in the survivor’s frontmatter as `merged_from: [other.md]`.',
      '- Turn relative dates ("yesterday", "last week") into absolute dates (YYYY-MM-DD).',
      '- When a fact was contradicted, fix it at its source: correct or remove the wrong statement in the file ' +
        'that holds it, rather than adding a second memory that disagrees with the first.',
    ].join('\n'),
    [
      '## Phase 4 — Prune and re-index',
      '',
      `- \`${ENTRYPOINT_NAME}\` is an index, not a memory: one line per memory, \`- [Title](file.md) — hook\`, ` +
        `each under ~${MAX_INDEX_LINE_CHARS} characters. Keep it under ${MAX_ENTRYPOINT_LINES} lines and ` +
        `${MAX_ENTRYPOINT_CHARS.toLocaleString('en-US')} characters: anything beyond is never loaded.`,
      '- Remove pointers to files that no longer exist or that you emptied, add pointers for new files, and ' +
        'shorten long lines by moving their detail into the topic file.',
      '- To delete a memory file (absorbed into another, or obsolete), overwrite it with empty content (Write ' +
        `with \`content: ""\`) and remove its line from \`${ENTRYPOINT_NAME}\`. Emptied files are deleted after ` +
        'the run; a snapshot taken before the run keeps them recoverable.',
    ].join('\n'),
    [
      '## Tools and guardrails',
      '',
      '- Read, Grep and Glob anywhere. Bash only for read-only commands (ls, find, grep, cat, stat, wc, head, ' +
        'tail and similar): anything that writes, moves or deletes files is denied, so do not try `rm`, `mv` ' +
        'or redirection.',
      '- Edit and Write only for files inside the memory directory; Edit or Write on an existing file needs a ' +
        'Read of it first.',
      `- The run is rolled back if it leaves \`${ENTRYPOINT_NAME}\` empty or unreadable while memories exist, ` +
        `or deletes more than ${share}% of the memories without folding their content into the ones that remain.`,
    ].join('\n'),
  ];
  if (opts.manifest !== undefined) {
    parts.push(
      ['## Memory files now', '', opts.manifest.trim() === '' ? '(none yet)' : opts.manifest.trim()].join(
        '\n',
      ),
    );
  }
  parts.push(
    [`## Sessions since the last consolidation (${opts.sessionIds.length})`, '', sessionList].join('\n'),
    'Finish with a brief summary of what you created, merged, corrected or removed — or say that nothing ' +
      'needed to change.',
  );
  return parts.join('\n\n');
}
