import {
  EXPLICIT_REQUEST_RULE,
  howToSaveSection,
  typesSection,
  whatNotToSaveSection,
} from './memory-prompt.js';

// The instruction appended (as one user message) to a forked copy of the conversation, telling it to turn the
// last messages into memories. It pre-injects the manifest of existing memory files so the fork does not spend
// a turn listing the directory, and plans its limited turns: all reads, then all writes.

export interface ExtractionPromptOptions {
  /** Model-visible messages since the extraction cursor. */
  newMessageCount: number;
  /** formatMemoryManifest(...) output; empty when there are no memories yet. */
  manifest: string;
  memoryDir: string;
  teamDir?: string;
  skipIndex?: boolean;
  /** The fork's turn cap, stated to the model. Default 5. */
  maxTurns?: number;
  /**
   * Memory files an earlier attempt of this same extraction already wrote (it was interrupted): their facts
   * are saved; the fork must not save them again under another name.
   */
  alreadyWritten?: readonly string[];
}

export function buildExtractionPrompt(opts: ExtractionPromptOptions): string {
  const n = Math.max(1, Math.floor(opts.newMessageCount));
  const combined = opts.teamDir !== undefined;
  const dirs = combined
    ? `the private memory directory \`${opts.memoryDir}\` or the team memory directory \`${opts.teamDir}\``
    : `the memory directory \`${opts.memoryDir}\``;
  const manifest = opts.manifest.trim() === '' ? '(none yet)' : opts.manifest.trim();
  const opener = [
    `You are now the memory extraction subagent. Read the most recent ~${n} messages above and use them to ` +
      'update persistent memory.',
    '',
    `Tools: Read, Grep, Glob, read-only Bash (ls, find, cat, stat, wc, head, tail and similar), and Edit/Write ` +
      `for files inside ${dirs} only. \`rm\` is not allowed; any other tool call will be denied.`,
    '',
    `You have at most ${opts.maxTurns ?? 5} turns, and Edit needs a prior Read of the same file. So: in your ` +
      'first turn, Read every file you might change, all in parallel; in your second turn, make every Write ' +
      'and Edit, all in parallel. Do not alternate reads and writes over several turns.',
    '',
    `Use ONLY what the last ~${n} messages say. Do not spend turns investigating or verifying it — no ` +
      'grepping source files, no reading code to confirm a pattern, no git commands.',
    '',
    '## Existing memory files',
    '',
    manifest,
    '',
    'Check this list before writing: update an existing file instead of creating a duplicate.',
    ...(opts.alreadyWritten?.length
      ? [
          '',
          '## Already saved by an earlier attempt of this extraction',
          '',
          'This extraction was interrupted after it had written these files; what they say is saved. Do not ' +
            'save the same facts again under another name — Read and Edit these files if anything is missing:',
          '',
          ...opts.alreadyWritten.map((file) => `- ${file}`),
        ]
      : []),
  ].join('\n');
  return [
    opener,
    EXPLICIT_REQUEST_RULE,
    typesSection(combined),
    whatNotToSaveSection(combined),
    howToSaveSection({ skipIndex: opts.skipIndex === true, combined }),
  ].join('\n\n');
}
