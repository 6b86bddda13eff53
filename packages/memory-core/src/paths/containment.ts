import { promises as fs } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';

// The last line between a model's Write/Edit call and the host filesystem. A target is inside a root only if,
// after resolving `..`, normalizing Unicode and resolving every symlink that exists on the way, its real
// location is strictly below the root's real location. Anything the check cannot establish — dangling
// symlinks, loops, permission or I/O errors, paths running through a file — is refused (fail closed).

export type ContainmentResult = { ok: true; path: string } | { ok: false; reason: string };

/** The two filesystem calls the check needs; injectable so tests can simulate EACCES/EIO. */
export interface ContainmentFs {
  realpath(path: string): Promise<string>;
  lstat(path: string): Promise<{ isSymbolicLink(): boolean }>;
}

const nodeFs: ContainmentFs = { realpath: (p) => fs.realpath(p), lstat: (p) => fs.lstat(p) };

export interface ContainmentOptions {
  fs?: ContainmentFs;
}

/**
 * Decides whether `target` resolves strictly inside `root`. Both must be absolute: a relative target would
 * resolve against this process's cwd, which is meaningless to a model, so it is refused rather than guessed;
 * `~` is never expanded. On success returns the real path the write would land on (existing ancestors
 * realpath'd, the not-yet-existing tail appended). The `reason` never contains either path.
 */
export async function resolveInside(
  target: string,
  root: string,
  options: ContainmentOptions = {},
): Promise<ContainmentResult> {
  const io = options.fs ?? nodeFs;
  const precheck = checkInputs(target, root);
  if (precheck) return { ok: false, reason: precheck };

  const realRoot = await realpathDeepestExisting(resolve(root).normalize('NFC'), io);
  if (!realRoot.ok) return { ok: false, reason: `the root directory cannot be resolved: ${realRoot.reason}` };

  // NFC cannot create or remove `/` or `.`, but the raw form is what a tool would actually open: when the two
  // differ, both must pass.
  const forms = target.normalize('NFC') === target ? [target] : [target.normalize('NFC'), target];
  const logicalRoot = resolve(root).normalize('NFC');
  let result: ContainmentResult | undefined;
  for (const form of forms) {
    const logical = resolve(form);
    if (logical === logicalRoot || logical === realRoot.path) {
      return { ok: false, reason: 'the path is the allowed directory itself, not a file inside it' };
    }
    // Cheap string check first: a target whose logical path is outside can be refused without touching disk,
    // unless the root itself sits behind a symlink (then only the real paths can be compared).
    if (!isStrictlyWithin(logical, logicalRoot) && !isStrictlyWithin(logical, realRoot.path)) {
      return { ok: false, reason: 'the path is outside the allowed directory' };
    }
    const real = await realpathDeepestExisting(logical, io);
    if (!real.ok) return { ok: false, reason: real.reason };
    if (!isStrictlyWithin(real.path, realRoot.path)) {
      return {
        ok: false,
        reason: 'the path resolves (through a symlink or ..) outside the allowed directory',
      };
    }
    result ??= { ok: true, path: real.path };
  }
  return result ?? { ok: false, reason: 'the path could not be checked' };
}

/** `resolveInside(...).ok`. */
export async function isInside(
  target: string,
  root: string,
  options: ContainmentOptions = {},
): Promise<boolean> {
  return (await resolveInside(target, root, options)).ok;
}

function checkInputs(target: string, root: string): string | undefined {
  if (typeof target !== 'string' || target === '') return 'the path is empty';
  if (typeof root !== 'string' || root === '') return 'the allowed directory is empty';
  if (target.includes('\0') || root.includes('\0')) return 'the path contains a NUL byte';
  if (target.startsWith('~')) return 'paths starting with "~" are not expanded; use an absolute path';
  if (!isAbsolute(target)) return 'the path is relative; use an absolute path';
  if (!isAbsolute(root)) return 'the allowed directory is not an absolute path';
  if (target.startsWith('//') || target.startsWith('\\\\')) return 'UNC/network paths are not allowed';
  return undefined;
}

/** True when `child` is strictly below `parent` with a separator boundary (`/mem-evil` is not in `/mem`). */
export function isStrictlyWithin(child: string, parent: string): boolean {
  const prefix = parent.endsWith(sep) ? parent : parent + sep;
  return child.length > prefix.length && child.startsWith(prefix);
}

type RealpathResult = { ok: true; path: string } | { ok: false; reason: string };

const MAX_WALK = 4096;

/**
 * Realpath of the deepest existing ancestor of `path`, with the missing tail re-appended. A missing component
 * that is itself a symlink (dangling) is refused: writing through it would create its target, wherever that
 * points. Loops and every error other than "does not exist" are refused.
 */
export async function realpathDeepestExisting(
  path: string,
  io: ContainmentFs = nodeFs,
): Promise<RealpathResult> {
  const tail: string[] = [];
  let current = path;
  for (let step = 0; step < MAX_WALK; step++) {
    try {
      const real = await io.realpath(current);
      return { ok: true, path: tail.length === 0 ? real : join(real, ...tail.reverse()) };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ELOOP') return { ok: false, reason: 'the path contains a symlink loop' };
      if (code === 'ENOTDIR')
        return { ok: false, reason: 'a component of the path is a file, not a directory' };
      if (code !== 'ENOENT')
        return { ok: false, reason: `the path cannot be checked (${code ?? 'unknown error'})` };
    }
    // `current` does not resolve. If it exists as a link, the link dangles.
    try {
      const stat = await io.lstat(current);
      if (stat.isSymbolicLink()) return { ok: false, reason: 'the path goes through a dangling symlink' };
      // It exists but realpath said it does not: raced with a rename or something stranger. Refuse.
      return { ok: false, reason: 'the path changed while it was being checked' };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT')
        return { ok: false, reason: `the path cannot be checked (${code ?? 'unknown error'})` };
    }
    const parent = dirname(current);
    if (parent === current) return { ok: false, reason: 'no part of the path exists' };
    tail.push(basename(current));
    current = parent;
  }
  return { ok: false, reason: 'the path is too deep to check' };
}

// ---------------------------------------------------------------------------------------------------------
// Team memory keys arrive from a server (relative paths like `notes/deploy.md`). Beyond containment, keys that
// only become traversal after decoding or normalization are refused outright: another component (a proxy,
// a different OS, a future decoder) may decode them where we did not.

export type TeamKeyErrorCode =
  | 'EMPTY'
  | 'NUL_BYTE'
  | 'ENCODED_TRAVERSAL'
  | 'MALFORMED_ENCODING'
  | 'UNICODE_TRAVERSAL'
  | 'BACKSLASH'
  | 'ABSOLUTE'
  | 'TRAVERSAL'
  | 'TOO_LONG';

export type TeamKeyResult = { ok: true; key: string } | { ok: false; code: TeamKeyErrorCode; reason: string };

const MAX_TEAM_KEY_LENGTH = 1024;

export function validateTeamKey(key: string): TeamKeyResult {
  const fail = (code: TeamKeyErrorCode, reason: string): TeamKeyResult => ({ ok: false, code, reason });
  if (typeof key !== 'string' || key === '') return fail('EMPTY', 'team memory key is empty');
  if (key.length > MAX_TEAM_KEY_LENGTH) return fail('TOO_LONG', 'team memory key is too long');
  if (key.includes('\0')) return fail('NUL_BYTE', 'team memory key contains a NUL byte');

  // Percent-decoding (repeated, to catch double encoding) must not introduce separators or dot-dot.
  let decoded = key;
  for (let round = 0; round < 3 && decoded.includes('%'); round++) {
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return fail('MALFORMED_ENCODING', 'team memory key contains a malformed %-escape');
    }
    if (next === decoded) break;
    if (introducesTraversal(key, next)) {
      return fail('ENCODED_TRAVERSAL', 'team memory key hides a path separator or ".." behind %-encoding');
    }
    decoded = next;
  }

  // Fullwidth dots and slashes (and similar compatibility forms) fold to ASCII under NFKC.
  const folded = key.normalize('NFKC');
  if (folded !== key && introducesTraversal(key, folded)) {
    return fail(
      'UNICODE_TRAVERSAL',
      'team memory key contains look-alike dots or slashes that normalize to traversal',
    );
  }
  if (key.includes('\\')) return fail('BACKSLASH', 'team memory key contains a backslash; use "/"');
  if (key.startsWith('/') || /^[A-Za-z]:/.test(key))
    return fail('ABSOLUTE', 'team memory key must be relative');
  if (key.split('/').some((segment) => segment === '..')) {
    return fail('TRAVERSAL', 'team memory key contains a ".." segment');
  }
  return { ok: true, key: key.normalize('NFC') };
}

function introducesTraversal(original: string, transformed: string): boolean {
  const count = (s: string, ch: string) => s.split(ch).length - 1;
  return (
    transformed.includes('..') ||
    transformed.includes('\0') ||
    count(transformed, '/') > count(original, '/') ||
    count(transformed, '\\') > count(original, '\\')
  );
}

/** Validates a server key and resolves it inside `teamDir`; the path to write, or a refusal. */
export async function resolveTeamKeyPath(
  teamDir: string,
  key: string,
  options: ContainmentOptions = {},
): Promise<ContainmentResult> {
  const valid = validateTeamKey(key);
  if (!valid.ok) return { ok: false, reason: valid.reason };
  return resolveInside(join(teamDir, valid.key), teamDir, options);
}
