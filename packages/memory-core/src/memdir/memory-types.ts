// The closed taxonomy of memories (docs/design.md §4). A file with a missing or unknown type still loads, with its
// type undefined, so memories written by older or other tools keep working.

export const MEMORY_TYPES = ['user', 'feedback', 'project', 'reference'] as const;

export type MemoryType = (typeof MEMORY_TYPES)[number];

export function isMemoryType(value: unknown): value is MemoryType {
  return typeof value === 'string' && (MEMORY_TYPES as readonly string[]).includes(value);
}

/** The type named by a frontmatter value, or undefined for anything else (case and surrounding space tolerated). */
export function parseMemoryType(value: unknown): MemoryType | undefined {
  if (typeof value !== 'string') return undefined;
  const candidate = value.trim().toLowerCase();
  return isMemoryType(candidate) ? candidate : undefined;
}
