import { isAbsolute } from 'node:path';

// The environment a sandboxed command starts with: an allowlist, not a denylist. Whatever the worker's own
// environment holds — credentials, PAGER, LESSOPEN, GIT_*, LD_PRELOAD, BASH_ENV, PROMPT_COMMAND, TEXTDOMAINDIR
// (the catalogue `$"…"` strings are translated from) — a command sees only the locale, the time zone and a
// PATH of absolute directories, plus the fixed values set here.

/** Where HOME points inside the sandbox: an empty directory on the sandbox's private /tmp. */
export const SANDBOX_HOME = '/tmp/home';
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const PASSED_NAMES = new Set(['LANG', 'LANGUAGE', 'TZ']);
const LOCALE_NAME = /^LC_[A-Z]+$/;
/** Locale values are names such as `en_US.UTF-8` or `C`; anything else (a path, a command) is dropped. */
const LOCALE_VALUE = /^[A-Za-z0-9_.@:+-]{1,64}$/;

/** PATH with only absolute directories (an empty or relative entry would search the working directory). */
export function sanitizePath(value: string | undefined): string {
  const dirs = (value ?? '').split(':').filter((d) => d !== '' && isAbsolute(d) && !d.includes('\0'));
  return dirs.length > 0 ? [...new Set(dirs)].join(':') : DEFAULT_PATH;
}

export function sandboxEnvironment(base: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined) continue;
    if ((PASSED_NAMES.has(name) || LOCALE_NAME.test(name)) && LOCALE_VALUE.test(value)) env[name] = value;
  }
  env.PATH = sanitizePath(base.PATH);
  env.HOME = SANDBOX_HOME;
  env.TMPDIR = '/tmp';
  env.TERM = 'dumb';
  env.USER = 'engram';
  env.LOGNAME = 'engram';
  env.SHELL = '/bin/sh';
  return env;
}
