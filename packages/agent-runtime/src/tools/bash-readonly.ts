// Decides whether a shell command line only reads. It is a filter, not the boundary: memory forks run Bash
// inside the OS sandbox whatever this says; the foreground uses it to decide what runs without asking.
//
// The line is parsed by tree-sitter-bash (bash-parse.ts); only plain words and plain quoted strings are
// accepted, in lists, pipelines and subshells of simple commands. Each simple command's program must be in
// the tables of bash-programs.ts and bash-git.ts, and its arguments are parsed against that program's option table as getopt_long / git's
// parse-options would parse them (bash-options.ts): option clusters, attached values, long-option
// abbreviations. An unknown program, an unknown option, an option that writes or executes, or anything the
// parser cannot see through makes the answer "not read-only". A false "no" costs a prompt or a denied call;
// a false "yes" would be a bug.

import { type Context, deny, NotReadOnly, programName } from './bash-check.js';
import { OptionRefusal } from './bash-options.js';
import { type Arg, parseBashLine, type Redirect, type SimpleCommand, Unanalysable } from './bash-parse.js';
import { PROGRAMS } from './bash-programs.js';

/** Variables that may be set for a read-only command: they change formatting, never what runs. */
const SAFE_ASSIGNMENTS = /^(LC_[A-Z]+|LANG|LANGUAGE|TZ|NO_COLOR|TERM|COLUMNS|LINES|GREP_COLOR|GREP_COLORS)$/;

// ---------------------------------------------------------------- redirections

/**
 * `>/dev/null` (and `2>`, `>>`, `&>`, `>|` to it) is accepted: opening the null device for writing, even with
 * truncation, changes nothing. Only the literal path counts. Input from a file is reading, except bash's
 * `/dev/tcp` and `/dev/udp` pseudo-files, which open network connections.
 */
function checkRedirect(r: Redirect): void {
  const target = r.target;
  switch (r.op) {
    case '<':
      if (!target || target.multi) deny('reads from a pattern');
      if (/^\/dev\/(tcp|udp)\//.test(target!.text)) deny('opens a network connection');
      return;
    case '>&-':
    case '<&-':
    case '<<<':
      return; // closing a descriptor; a here-string is read
    case '<&':
    case '>&':
      if (target?.exact && /^(\d+|-)$/.test(target.text)) return; // 2>&1, >&2, <&0
      if (r.op === '>&' && target?.exact && target.text === '/dev/null') return;
      deny('writes through a redirection');
      return;
    case '>':
    case '>>':
    case '>|':
    case '&>':
    case '&>>':
      if (target?.exact && target.text === '/dev/null') return;
      deny('writes through a redirection');
      return;
    default:
      deny(`redirection ${r.op}`);
      return;
  }
}

// ---------------------------------------------------------------- commands

const WRAPPERS = new Set(['time', 'nice', 'timeout', 'xargs']);

function checkWords(cmdWords: Arg[], ctx: Context): void {
  if (ctx.depth > 4) deny('too many nested wrappers');
  const first = cmdWords[0];
  if (!first) {
    if (ctx.depth === 0) deny('empty command');
    return;
  }
  if (!first.exact) deny('the program name is not a plain, known command');
  const name = programName(first.text);
  if (name === undefined) deny('the program name is not a plain, known command');
  const check = Object.hasOwn(PROGRAMS, name!) ? PROGRAMS[name!] : undefined;
  if (!check) deny(`\`${name}\` is not a known read-only command`);
  try {
    check!(cmdWords.slice(1), { ...ctx, depth: WRAPPERS.has(name!) ? ctx.depth + 1 : ctx.depth });
  } catch (e) {
    if (e instanceof OptionRefusal)
      deny(`\`${name}\` is used with arguments that may write or execute (${e.message})`);
    if (e instanceof NotReadOnly && !e.message.startsWith('`'))
      deny(`\`${name}\` is used with arguments that may write or execute (${e.message})`);
    throw e;
  }
}

function checkCommand(cmd: SimpleCommand): void {
  for (const a of cmd.assignments) {
    if (!SAFE_ASSIGNMENTS.test(a.name)) deny(`sets environment variable ${a.name}`);
    if (!a.value.exact) deny(`sets environment variable ${a.name} to an expansion`);
  }
  checkWords(cmd.words, { depth: 0, checkWords });
}

const DIRECTORY_CHANGERS = new Set(['cd', 'pushd', 'popd']);

/** Why a command is not read-only, or undefined when it is. Useful in denial messages and tests. */
export function explainBashCommand(command: string): string | undefined {
  if (command.trim().length === 0) return 'empty command';
  let line: ReturnType<typeof parseBashLine>;
  try {
    line = parseBashLine(command);
  } catch (e) {
    if (e instanceof Unanalysable) return `cannot be analysed: ${e.message}`;
    throw e;
  }
  if (line.commands.length === 0) return 'empty command';
  try {
    for (const r of line.redirects) checkRedirect(r);
    for (const c of line.commands) checkCommand(c);
    const names = line.commands.map((c) => (c.words[0]?.exact ? programName(c.words[0].text) : undefined));
    if (names.includes('git') && names.some((n) => n !== undefined && DIRECTORY_CHANGERS.has(n)))
      deny('git after a directory change may run another repository’s configuration');
  } catch (e) {
    if (e instanceof NotReadOnly) return e.message;
    if (e instanceof OptionRefusal) return e.message;
    throw e;
  }
  return undefined;
}

export function isReadOnlyBashCommand(command: string): boolean {
  return explainBashCommand(command) === undefined;
}

/** The commands a read-only Bash policy accepts, for denial messages the model can act on. */
export const READ_ONLY_COMMAND_HINT =
  'ls, find (without -exec/-delete), grep, rg, cat, head, tail, wc, stat, du, sort, uniq, cut, sed -n, jq, ' +
  'git status/log/diff/show';
