import fs, { type Dirent } from 'node:fs';
import { sep } from 'node:path';

// The one directory walker. Every recursive listing in Engram goes through it: the memory scan (synchronous,
// on every recall), consolidation's file list and snapshots, the tree hashes a memory job's receipt is
// computed from, the team directory's sync, CLAUDE.md's `.claude/rules/**`, and the Glob tool. The callers
// differ only in options: whether symlinks are listed, whether hidden entries count, how deep to go, which
// directories to skip, which files to keep, and the bounds. What every caller gets alike: symlinked
// directories are never followed (a link can point anywhere, including back up the tree); a missing root is
// an empty listing, not an error; an unreadable directory is reported and the walk goes on; the bounds stop
// the walk and say so instead of throwing.

export type SymlinkPolicy =
  /** Symlinks are neither listed nor followed (default). */
  | 'skip'
  /** A symlink is listed like a file (`symlink: true`) when `include` accepts its name; never followed. */
  | 'list';

export interface WalkOptions {
  /** Default 'skip'. */
  symlinks?: SymlinkPolicy;
  /** List files and enter directories whose name starts with "." (default false: `.history`, `.git`, temp files). */
  hidden?: boolean;
  /** Deepest directory listed, counting the root as 0 (default: no limit). */
  maxDepth?: number;
  /** Directory names never entered (at any depth). */
  skipDirectories?: ReadonlySet<string>;
  /** Which files to list (default all), by entry name and relative path. */
  include?: (name: string, rel: string) => boolean;
  /** Directory entries visited (of any kind) before the walk stops with `truncated: 'entries'`. */
  maxEntries?: number;
  /** Files listed before the walk stops with `truncated: 'files'`. */
  maxFiles?: number;
  /**
   * true: each directory's files in name order, then its subdirectories in name order, depth-first — the
   * same order on every run. false (default): the order the system lists them, cheapest.
   */
  sorted?: boolean;
  /** Checked before each directory; an aborted walk rejects (throws) with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Asynchronous walks only, Linux (elsewhere ignored): each directory below the root is opened relative to
   * its parent's descriptor with O_NOFOLLOW and listed through that descriptor, never by its path. A
   * directory renamed into a symlink while the walk runs is then an error (ENOTDIR or ELOOP in `errors`),
   * never entered: at no depth does the walk leave the root's inode. The root itself is opened as named.
   */
  descriptors?: boolean;
}

export interface WalkedFile {
  /** Relative to the root, forward slashes. */
  rel: string;
  /** The root joined with the entry's path. */
  path: string;
  /** The entry is a symbolic link (only with `symlinks: 'list'`); where it points is not checked. */
  symlink: boolean;
}

export interface WalkError {
  /** The directory that could not be listed, relative to the root ('' for the root itself). */
  rel: string;
  path: string;
  /** The system error code (ENOTDIR, EACCES, ENOENT for a directory that vanished mid-walk, …). */
  code: string;
}

export interface WalkResult {
  files: WalkedFile[];
  /** Directories that could not be listed; the walk went on without them. */
  errors: WalkError[];
  /** Set when a bound stopped the walk: the listing is incomplete. */
  truncated?: 'entries' | 'files';
  /** The root does not exist (the listing is empty, and this is not an error). */
  rootMissing: boolean;
}

interface Pending {
  rel: string;
  path: string;
  depth: number;
  /** With `descriptors`: the open parent directory this one is looked up in, and its name there. */
  parent?: DirRef;
  name?: string;
}

/** An open directory shared by its pending subdirectories; closed when the last of them has been opened. */
interface DirRef {
  handle: fs.promises.FileHandle;
  pending: number;
}

/** Per-walk state shared by the synchronous and asynchronous drivers. */
class Walk {
  readonly errors: WalkError[] = [];
  truncated: 'entries' | 'files' | undefined;
  rootMissing = false;
  private visited = 0;
  private listed = 0;
  private readonly symlinks: boolean;
  private readonly hidden: boolean;
  private readonly maxDepth: number;
  private readonly maxEntries: number;
  private readonly maxFiles: number;
  private readonly skip: ReadonlySet<string> | undefined;
  private readonly include: ((name: string, rel: string) => boolean) | undefined;
  readonly sorted: boolean;

  constructor(opts: WalkOptions) {
    this.symlinks = opts.symlinks === 'list';
    this.hidden = opts.hidden === true;
    this.maxDepth = opts.maxDepth ?? Number.POSITIVE_INFINITY;
    this.maxEntries = opts.maxEntries ?? Number.POSITIVE_INFINITY;
    this.maxFiles = opts.maxFiles ?? Number.POSITIVE_INFINITY;
    this.skip = opts.skipDirectories;
    this.include = opts.include;
    this.sorted = opts.sorted === true;
  }

  failed(dir: Pending, error: unknown): void {
    const code = (error as NodeJS.ErrnoException).code ?? 'UNKNOWN';
    if (dir.rel === '' && code === 'ENOENT') this.rootMissing = true;
    else this.errors.push({ rel: dir.rel, path: dir.path, code });
  }

  /**
   * Takes one directory's entries: appends its files to `out`, and returns its subdirectories to enter (in
   * order), or undefined when a bound stopped the walk.
   */
  take(dir: Pending, entries: Dirent[], out: WalkedFile[]): Pending[] | undefined {
    if (this.sorted) entries.sort(byName);
    const subdirs: Pending[] = [];
    const prefix = dir.rel === '' ? '' : `${dir.rel}/`;
    const pathPrefix = dir.path.endsWith(sep) ? dir.path : dir.path + sep;
    for (const entry of entries) {
      if (++this.visited > this.maxEntries) {
        this.truncated = 'entries';
        return undefined;
      }
      const name = entry.name;
      if (!this.hidden && name.charCodeAt(0) === 46 /* . */) continue;
      if (entry.isDirectory()) {
        if (dir.depth < this.maxDepth && !this.skip?.has(name)) {
          subdirs.push({ rel: prefix + name, path: pathPrefix + name, depth: dir.depth + 1 });
        }
        continue;
      }
      const symlink = entry.isSymbolicLink();
      if (symlink ? !this.symlinks : !entry.isFile()) continue;
      const rel = prefix + name;
      if (this.include !== undefined && !this.include(name, rel)) continue;
      if (this.listed >= this.maxFiles) {
        this.truncated = 'files';
        return undefined;
      }
      this.listed++;
      out.push({ rel, path: pathPrefix + name, symlink });
    }
    return subdirs;
  }

  result(files: WalkedFile[]): WalkResult {
    const result: WalkResult = { files, errors: this.errors, rootMissing: this.rootMissing };
    if (this.truncated) result.truncated = this.truncated;
    return result;
  }
}

function byName(a: Dirent, b: Dirent): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason ?? new DOMException('The walk was aborted.', 'AbortError');
}

/** Pushes `subdirs` so that the first of them is taken next (depth-first, in their order). */
function pushInOrder(stack: Pending[], subdirs: Pending[]): void {
  for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i] as Pending);
}

/** Synchronous walk (the memory scan's: a thread-pool round trip per directory would cost more than the read). */
export function walkSync(root: string, opts: WalkOptions = {}): WalkResult {
  const walk = new Walk(opts);
  const files: WalkedFile[] = [];
  const stack: Pending[] = [{ rel: '', path: root, depth: 0 }];
  while (stack.length > 0) {
    throwIfAborted(opts.signal);
    const dir = stack.pop() as Pending;
    let entries: Dirent[];
    try {
      entries = fs.readdirSync(dir.path, { withFileTypes: true });
    } catch (error) {
      walk.failed(dir, error);
      continue;
    }
    const subdirs = walk.take(dir, entries, files);
    if (subdirs === undefined) break;
    pushInOrder(stack, subdirs);
  }
  return walk.result(files);
}

/** Asynchronous walk: the whole listing. */
export async function walk(root: string, opts: WalkOptions = {}): Promise<WalkResult> {
  const state = new Walk(opts);
  const files: WalkedFile[] = [];
  for await (const file of walkState(state, root, opts)) files.push(file);
  return state.result(files);
}

/**
 * Asynchronous walk, one file at a time (Glob: a caller may stop early). Unreadable directories are passed to
 * `onError` when given; an aborted signal ends the iteration with the signal's reason.
 */
export async function* walkFiles(
  root: string,
  opts: WalkOptions & { onError?: (error: WalkError) => void } = {},
): AsyncGenerator<WalkedFile> {
  const state = new Walk(opts);
  let reported = 0;
  for await (const file of walkState(state, root, opts)) {
    if (opts.onError)
      while (reported < state.errors.length) opts.onError(state.errors[reported++] as WalkError);
    yield file;
  }
  if (opts.onError)
    while (reported < state.errors.length) opts.onError(state.errors[reported++] as WalkError);
}

async function* walkState(state: Walk, root: string, opts: WalkOptions): AsyncGenerator<WalkedFile> {
  if (opts.descriptors && DESCRIPTORS_WORK) {
    yield* walkStateByDescriptor(state, root, opts);
    return;
  }
  const stack: Pending[] = [{ rel: '', path: root, depth: 0 }];
  while (stack.length > 0) {
    throwIfAborted(opts.signal);
    const dir = stack.pop() as Pending;
    let entries: Dirent[];
    try {
      entries = await fs.promises.readdir(dir.path, { withFileTypes: true });
    } catch (error) {
      state.failed(dir, error);
      continue;
    }
    const found: WalkedFile[] = [];
    const subdirs = state.take(dir, entries, found);
    yield* found;
    if (subdirs === undefined) return;
    pushInOrder(stack, subdirs);
  }
}

const PROC_FD = '/proc/self/fd';
const DESCRIPTORS_WORK = process.platform === 'linux';
const DIR_FLAGS = fs.constants.O_RDONLY | fs.constants.O_DIRECTORY;

async function release(ref: DirRef | undefined): Promise<void> {
  if (ref && --ref.pending === 0) await ref.handle.close().catch(() => {});
}

/**
 * The descriptor-relative walk: a directory is opened as `/proc/self/fd/<parent>/<name>` with O_NOFOLLOW
 * (Node has no openat; the kernel resolves the magic link to the parent's inode, then looks `name` up in it
 * without following it) and listed as `/proc/self/fd/<own>`. Open descriptors: one per directory on the
 * current path plus the parents of pending siblings.
 */
async function* walkStateByDescriptor(
  state: Walk,
  root: string,
  opts: WalkOptions,
): AsyncGenerator<WalkedFile> {
  const stack: Pending[] = [{ rel: '', path: root, depth: 0 }];
  try {
    while (stack.length > 0) {
      throwIfAborted(opts.signal);
      const dir = stack.pop() as Pending;
      let handle: fs.promises.FileHandle;
      try {
        handle = dir.parent
          ? await fs.promises.open(
              `${PROC_FD}/${dir.parent.handle.fd}/${dir.name}`,
              DIR_FLAGS | fs.constants.O_NOFOLLOW,
            )
          : await fs.promises.open(root, DIR_FLAGS);
      } catch (error) {
        state.failed(dir, error);
        continue;
      } finally {
        await release(dir.parent);
      }
      const ref: DirRef = { handle, pending: 0 };
      let entries: Dirent[];
      try {
        entries = await fs.promises.readdir(`${PROC_FD}/${handle.fd}`, { withFileTypes: true });
      } catch (error) {
        await handle.close().catch(() => {});
        state.failed(dir, error);
        continue;
      }
      const found: WalkedFile[] = [];
      const subdirs = state.take(dir, entries, found);
      if (subdirs === undefined || subdirs.length === 0) await handle.close().catch(() => {});
      else {
        ref.pending = subdirs.length;
        for (const sub of subdirs) {
          sub.parent = ref;
          sub.name = sub.path.slice(sub.path.lastIndexOf(sep) + 1);
        }
      }
      yield* found;
      if (subdirs === undefined) return;
      pushInOrder(stack, subdirs);
    }
  } finally {
    // Stopped early (a bound, an abort, a caller that stopped iterating): close what is still open.
    for (const pending of stack) await release(pending.parent);
  }
}
