// The one directory an unattended agent may change, declared by its permission policy. memory-core's policies
// (memory write, consolidation, session memory) attach it to the function they return; the agent runtime
// reads it off the policy and confines the agent's tools to it: Bash in an OS sandbox that sees the directory
// read-only (unless `bash: 'write-root'`), Write/Edit through a write that cannot leave it. Neither package
// depends on the other, so the declaration lives here and both import it.

export interface WriteJail {
  /** The directory writes may land in (created and resolved to its real path by the runtime). */
  root: string;
  /** Whether Bash may write `root` too. Default 'read-only': only Write/Edit, after the policy, change it. */
  bash?: 'read-only' | 'write-root';
}

/** A policy (or any object) with its jail declared. */
export type Jailed<P> = P & { writeJail: WriteJail };

/** Declares `jail` on `policy` and returns the same object. */
export function withWriteJail<P extends object>(policy: P, jail: WriteJail): Jailed<P> {
  return Object.assign(policy, { writeJail: jail });
}

/**
 * The jail `policy` declares, normalised (`bash` always set, 'read-only' unless 'write-root'), or undefined
 * when it declares none or a malformed one (no non-empty string `root`).
 */
export function declaredWriteJail(policy: unknown): Required<WriteJail> | undefined {
  const jail = (policy as { writeJail?: unknown } | null | undefined)?.writeJail;
  if (!jail || typeof jail !== 'object') return undefined;
  const { root, bash } = jail as { root?: unknown; bash?: unknown };
  if (typeof root !== 'string' || root === '') return undefined;
  return { root, bash: bash === 'write-root' ? 'write-root' : 'read-only' };
}
