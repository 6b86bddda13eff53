import { z } from 'zod';

// The recall selector's prompt and output contract (docs/design.md §5 recall row; docs/claude-code-memory.md §5 "Selection"). A small
// model reads the user's query and the memory manifest and names the few files that will clearly help.

/** Most memories one recall may surface: 5 files × 4 KiB keeps one injection near 20 KiB. */
export const MAX_SELECTED_MEMORIES = 5;
/** The selector only lists filenames; 256 output tokens is ample and bounds its latency. */
export const SELECTOR_MAX_TOKENS = 256;

export const MEMORY_SELECTION_SYSTEM_PROMPT = [
  "You choose which saved memories a coding agent should see while it works on a user's request.",
  "You receive the user's query and a list of memory files, each with its filename, type, last-modified time",
  'and a one-line description.',
  '',
  `Reply with the filenames (exactly as listed, at most ${MAX_SELECTED_MEMORIES}) of the memories that will clearly`,
  "help the agent handle this query. Judge from each memory's name and description.",
  '- Include a memory only when you are certain it is useful for this query. When in doubt, leave it out:',
  '  be selective.',
  '- Returning an empty list is fine and expected when nothing listed clearly applies.',
  '- If a list of recently used tools is given, the agent is already using those tools successfully: do not',
  '  pick memories that are usage notes or API reference for them. Do still pick memories that hold warnings,',
  '  gotchas or known issues about those tools, because active use is exactly when those matter.',
].join('\n');

export interface SelectionUserMessageInput {
  query: string;
  /** `formatMemoryManifest` of the candidate headers. */
  manifest: string;
  recentTools?: readonly string[];
}

/** "Query: …", a blank line, "Available memories:" and the manifest, then the recent tools when there are any. */
export function buildSelectionUserMessage(input: SelectionUserMessageInput): string {
  const tools = (input.recentTools ?? []).filter((t) => t.length > 0);
  const toolsSection = tools.length > 0 ? `\n\nRecently used tools: ${tools.join(', ')}` : '';
  return `Query: ${input.query}\n\nAvailable memories:\n${input.manifest}${toolsSection}`;
}

/** The structured-output JSON schema sent with the selector request (`output_format: json_schema`). */
export const SELECTION_OUTPUT_JSON_SCHEMA: Record<string, unknown> = Object.freeze({
  type: 'object',
  properties: {
    selected_memories: { type: 'array', items: { type: 'string' } },
  },
  required: ['selected_memories'],
  additionalProperties: false,
});

/** The zod twin of SELECTION_OUTPUT_JSON_SCHEMA: what a selector reply must parse to. */
export const selectionOutputSchema = z.strictObject({
  selected_memories: z.array(z.string()),
});
export type SelectionOutput = z.infer<typeof selectionOutputSchema>;
