import { execFile } from 'node:child_process';
import { repoSlug } from '../contract.js';

// Team memory is scoped to a repository, named `owner/name` from its git origin remote. The same repository
// cloned over ssh or https, with or without `.git`, credentials or a port, must get the same name, so the
// remote URL is normalised here; anything that is not a hosted remote (a local path, file://) has no name.

export type RepoIdentity = { ok: true; repo: string; host: string } | { ok: false; reason: string };

/** `owner/name` (lower case) from a git remote URL, or why there is none. */
export function parseRemoteUrl(remote: string): RepoIdentity {
  const url = remote.trim();
  if (url === '') return { ok: false, reason: 'the origin remote has no URL' };
  let host: string;
  let path: string;
  const scheme = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/i.exec(url);
  if (scheme) {
    const protocol = scheme[1]!.toLowerCase();
    if (!['https', 'http', 'ssh', 'git', 'git+ssh', 'ssh+git'].includes(protocol)) {
      return { ok: false, reason: `the origin remote is a ${protocol}:// URL, not a hosted repository` };
    }
    let parsed: URL;
    try {
      parsed = new URL(
        `${protocol === 'git+ssh' || protocol === 'ssh+git' ? 'ssh' : protocol}://${scheme[2]}`,
      );
    } catch {
      return { ok: false, reason: 'the origin remote URL cannot be parsed' };
    }
    host = parsed.hostname;
    path = decodeURIComponent(parsed.pathname);
  } else {
    // scp-like syntax: [user@]host:owner/name(.git); a Windows drive (C:\…) or a plain path is local.
    const scp = /^(?:[^@/\s]+@)?([^:/\s]+):(?!\/\/)(.+)$/.exec(url);
    if (!scp || /^[A-Za-z]$/.test(scp[1]!)) {
      return { ok: false, reason: 'the origin remote is a local path, not a hosted repository' };
    }
    host = scp[1]!;
    path = scp[2]!;
  }
  const segments = path
    .replace(/\/+$/, '')
    .replace(/\.git$/i, '')
    .split('/')
    .filter((s) => s !== '');
  if (segments.length !== 2) {
    return {
      ok: false,
      reason: `the origin remote path has ${segments.length} parts; team memory needs owner/name`,
    };
  }
  const candidate = segments.join('/').toLowerCase();
  const valid = repoSlug.safeParse(candidate);
  if (!valid.success) return { ok: false, reason: `"${candidate}" is not an owner/name pair` };
  return { ok: true, repo: valid.data, host: host.toLowerCase() };
}

/** The origin remote's URL of the repository at `dir` (via `git config`), or undefined. */
export function readOriginUrl(dir: string, timeoutMs = 2_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['-C', dir, 'config', '--get', 'remote.origin.url'],
      {
        timeout: timeoutMs,
        windowsHide: true,
        // Only what git needs to find its config: no credentials of this process reach the child.
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? '/',
          GIT_TERMINAL_PROMPT: '0',
        },
      },
      (error, stdout) => resolve(error ? undefined : stdout.trim() || undefined),
    );
  });
}

/** The repository identity of `dir`: its origin remote, normalised. */
export async function repoIdentityOf(dir: string): Promise<RepoIdentity> {
  const url = await readOriginUrl(dir);
  if (!url) return { ok: false, reason: 'the project has no git origin remote' };
  return parseRemoteUrl(url);
}
