// Directory names under ENGRAM_HOME/projects are derived from absolute paths exactly as Claude Code derives
// them, so pointing ENGRAM_HOME at ~/.claude reads and writes the memory a Claude Code user already has.

/** Sanitized names longer than this are cut and suffixed with a hash of the whole input. */
export const MAX_SANITIZED_LENGTH = 200;

/**
 * The 32-bit string hash Claude Code uses on Node (seed 0, h·31 + code unit, wrapped to int32). Under Bun
 * Claude Code uses Bun.hash instead, so names over 200 characters differ between the two runtimes.
 */
export function djb2Hash(value: string): number {
  let hash = 0;
  for (let i = 0; i < value.length; i++) {
    hash = ((hash << 5) - hash + value.charCodeAt(i)) | 0;
  }
  return hash;
}

/**
 * Every character outside [A-Za-z0-9] becomes `-`; a result over 200 characters keeps its first 200 and gets
 * `-` + base-36 |djb2| of the original string, so long paths stay unique but bounded.
 */
export function sanitizePath(value: string): string {
  const sanitized = value.replace(/[^a-zA-Z0-9]/g, '-');
  if (sanitized.length <= MAX_SANITIZED_LENGTH) return sanitized;
  return `${sanitized.slice(0, MAX_SANITIZED_LENGTH)}-${Math.abs(djb2Hash(value)).toString(36)}`;
}
