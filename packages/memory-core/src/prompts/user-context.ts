// The memory block of the user context: the loaded MEMORY.md files, each introduced by its path and what kind
// of memory it is. Team memory is labelled as shared and fenced in a tag, so the model can tell content that
// any collaborator could have written from the user's own notes.

export interface MemoryContextFile {
  path: string;
  /** Already capped (see loadMemoryIndex): this function does not truncate. */
  content: string;
  kind: 'auto' | 'team';
}

export const MEMORY_CONTEXT_PREAMBLE =
  'The files below contain instructions and memory saved by the user and for this codebase. Follow them: ' +
  'they take precedence over your default behaviour, and you must apply them exactly as written.';

const LABELS: Record<MemoryContextFile['kind'], string> = {
  auto: "(user's auto-memory, persists across conversations)",
  team: '(shared team memory, synced across the organization)',
};

export function renderMemoryFileBlock(file: MemoryContextFile): string {
  const content = file.content.trim();
  const body =
    file.kind === 'team'
      ? `<team-memory-content source="shared">\n${content}\n</team-memory-content>`
      : content;
  return `Contents of ${file.path} ${LABELS[file.kind]}:\n\n${body}`;
}

/**
 * Renders the memory files for the user context. Files with empty content are left out; with no files left the
 * result is ''. `preamble: false` omits the instruction line, for callers that render it once above both
 * CLAUDE.md files and memory.
 */
export function renderMemoryFilesContext(
  files: ReadonlyArray<MemoryContextFile>,
  opts: { preamble?: boolean } = {},
): string {
  const blocks = files.filter((f) => f.content.trim() !== '').map(renderMemoryFileBlock);
  if (blocks.length === 0) return '';
  return opts.preamble === false
    ? blocks.join('\n\n')
    : `${MEMORY_CONTEXT_PREAMBLE}\n\n${blocks.join('\n\n')}`;
}
