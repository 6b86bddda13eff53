// Decides whether a shell command line only reads. It parses the line (quoting, pipelines, lists,
// subshells, redirections, assignments, expansions) and checks every simple command against an allow-list
// of read-only programs and flags. Anything it cannot see through — command or process substitution,
// heredocs, control structures, functions, unknown programs, flags it does not know to be safe — makes the
// answer "not read-only". A false "no" costs the model one denied call; a false "yes" could write files.

interface Word {
  kind: 'word';
  /** The word after quote removal; expansions contribute nothing (their value is unknown). */
  text: string;
  /** Contains a parameter expansion, an unquoted glob or brace expansion: its final value is unknown. */
  dynamic: boolean;
  quoted: boolean;
  /** The unquoted characters as typed, quoted parts replaced by `_` (finds `NAME=` and globs). */
  raw: string;
}

type OpToken = { kind: 'op'; op: ';' | '&&' | '||' | '|' | '|&' | '&' | '\n' | '(' | ')' };
type RedirOp = '<' | '>' | '>>' | '>|' | '<>' | '&>' | '&>>' | '>&' | '<&' | '<<' | '<<-' | '<<<';
type RedirToken = { kind: 'redir'; op: RedirOp; fd?: string };
type Token = Word | OpToken | RedirToken;

class Unsupported extends Error {}

const unsupported = (why: string): never => {
  throw new Unsupported(why);
};

const NAME_CHAR = /[A-Za-z0-9_]/;

/** Lists below are written as space-separated words to stay readable. */
function words(list: string): string[] {
  return list.split(/\s+/).filter(Boolean);
}
const NAME_START = /[A-Za-z_]/;

function lex(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  let word: { text: string; dynamic: boolean; quoted: boolean; started: boolean; raw: string } | undefined;
  const current = () => {
    word ??= { text: '', dynamic: false, quoted: false, started: true, raw: '' };
    return word;
  };
  const endWord = () => {
    if (word) {
      // Unquoted `[…]` and `{…}` in a word are glob / brace expansion: the resulting words are unknown.
      if (/\[.*\]/.test(word.raw) || /\{[^}]*(,|\.\.)[^}]*\}/.test(word.raw)) word.dynamic = true;
      tokens.push({
        kind: 'word',
        text: word.text,
        dynamic: word.dynamic,
        quoted: word.quoted,
        raw: word.raw,
      });
      word = undefined;
    }
  };
  const readExpansion = (w: NonNullable<typeof word>) => {
    // at `$`
    const next = input[i + 1];
    if (next === '(') unsupported('command substitution or arithmetic expansion');
    if (next === '{') {
      const close = input.indexOf('}', i + 2);
      if (close < 0) unsupported('unterminated ${');
      const inner = input.slice(i + 2, close);
      if (inner.includes('$(') || inner.includes('`'))
        unsupported('substitution inside a parameter expansion');
      w.dynamic = true;
      i = close + 1;
      return;
    }
    if (next !== undefined && NAME_START.test(next)) {
      i += 2;
      while (i < input.length && NAME_CHAR.test(input[i]!)) i++;
      w.dynamic = true;
      return;
    }
    if (next !== undefined && /[0-9@*#?$!-]/.test(next)) {
      i += 2;
      w.dynamic = true;
      return;
    }
    w.text += '$';
    i++;
  };

  while (i < input.length) {
    const c = input[i]!;
    if (c === '\\' && input[i + 1] === '\n') {
      i += 2;
      continue;
    }
    // Only space and tab separate words; a carriage return is an ordinary character to bash.
    if (c === ' ' || c === '\t') {
      endWord();
      i++;
      continue;
    }
    if (c === '\n') {
      endWord();
      tokens.push({ kind: 'op', op: '\n' });
      i++;
      continue;
    }
    if (c === '#' && !word) {
      while (i < input.length && input[i] !== '\n') i++;
      continue;
    }
    if (c === ';') {
      endWord();
      if (input[i + 1] === ';' || input[i + 1] === '&') unsupported('case terminator');
      tokens.push({ kind: 'op', op: ';' });
      i++;
      continue;
    }
    if (c === '&') {
      endWord();
      if (input.startsWith('&&', i)) {
        tokens.push({ kind: 'op', op: '&&' });
        i += 2;
      } else if (input.startsWith('&>>', i)) {
        tokens.push({ kind: 'redir', op: '&>>' });
        i += 3;
      } else if (input.startsWith('&>', i)) {
        tokens.push({ kind: 'redir', op: '&>' });
        i += 2;
      } else {
        tokens.push({ kind: 'op', op: '&' });
        i++;
      }
      continue;
    }
    if (c === '|') {
      endWord();
      if (input.startsWith('||', i)) {
        tokens.push({ kind: 'op', op: '||' });
        i += 2;
      } else if (input.startsWith('|&', i)) {
        tokens.push({ kind: 'op', op: '|&' });
        i += 2;
      } else {
        tokens.push({ kind: 'op', op: '|' });
        i++;
      }
      continue;
    }
    if (c === '(' || c === ')') {
      if (c === '(' && word) unsupported('parenthesis inside a word (function definition or array)');
      endWord();
      tokens.push({ kind: 'op', op: c });
      i++;
      continue;
    }
    if (c === '<' || c === '>') {
      let fd: string | undefined;
      if (word && !word.quoted && !word.dynamic && /^\d+$/.test(word.raw)) {
        fd = word.text;
        word = undefined;
      } else {
        endWord();
      }
      const ops: RedirOp[] = ['<<<', '<<-', '&>>', '<<', '<>', '<&', '>>', '>|', '>&', '<', '>'];
      const op = ops.find((o) => input.startsWith(o, i))!;
      i += op.length;
      if (input[i] === '(') unsupported('process substitution');
      tokens.push(fd === undefined ? { kind: 'redir', op } : { kind: 'redir', op, fd });
      continue;
    }
    if (c === "'") {
      const w = current();
      const close = input.indexOf("'", i + 1);
      if (close < 0) unsupported('unterminated single quote');
      w.text += input.slice(i + 1, close);
      w.raw += '_';
      w.quoted = true;
      i = close + 1;
      continue;
    }
    if (c === '"') {
      const w = current();
      w.quoted = true;
      w.raw += '_';
      i++;
      for (;;) {
        if (i >= input.length) unsupported('unterminated double quote');
        const d = input[i]!;
        if (d === '"') {
          i++;
          break;
        }
        if (d === '`') unsupported('command substitution');
        if (d === '\\') {
          const e = input[i + 1];
          if (e === '$' || e === '`' || e === '"' || e === '\\') w.text += e;
          else if (e === '\n') {
            /* line continuation */
          } else w.text += `\\${e ?? ''}`;
          i += 2;
          continue;
        }
        if (d === '$') {
          readExpansion(w);
          continue;
        }
        w.text += d;
        i++;
      }
      continue;
    }
    if (c === '`') unsupported('command substitution');
    if (c === '$') {
      const w = current();
      const next = input[i + 1];
      if (next === "'" || next === '"') {
        // $'…' (ANSI-C) and $"…" (locale): a quoted literal for our purposes.
        const quote = next;
        let j = i + 2;
        let text = '';
        while (j < input.length && input[j] !== quote) {
          if (input[j] === '\\' && quote === "'") {
            text += input[j + 1] ?? '';
            j += 2;
            continue;
          }
          if (quote === '"' && (input[j] === '$' || input[j] === '`')) unsupported('expansion in $"…"');
          text += input[j];
          j++;
        }
        if (j >= input.length) unsupported('unterminated quote');
        w.text += text;
        w.quoted = true;
        w.raw += '_';
        i = j + 1;
        continue;
      }
      w.raw += '$';
      readExpansion(w);
      continue;
    }
    const w = current();
    if (c === '\\') {
      w.text += input[i + 1] ?? '';
      w.raw += '_';
      w.quoted = true;
      i += 2;
      continue;
    }
    if (c === '*' || c === '?') w.dynamic = true;
    w.text += c;
    w.raw += c;
    i++;
  }
  endWord();
  return tokens;
}

// ---------------------------------------------------------------- parser

interface Redirection {
  op: RedirOp;
  fd?: string;
  target: Word;
}

interface SimpleCommand {
  kind: 'simple';
  assignments: Array<{ name: string; value: Word }>;
  words: Word[];
  redirections: Redirection[];
}

interface Subshell {
  kind: 'subshell';
  body: Pipeline[];
  redirections: Redirection[];
}

type Command = SimpleCommand | Subshell;

interface Pipeline {
  commands: Command[];
}

const RESERVED = new Set(
  words('if then else elif fi for while until do done case esac function select { } [[ ]] coproc'),
);

const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)(\+?)=/;

class Parser {
  private i = 0;
  constructor(private readonly tokens: Token[]) {}

  parseProgram(): Pipeline[] {
    const list = this.parseList(false);
    if (this.i < this.tokens.length) unsupported('unexpected token');
    return list;
  }

  private peek(): Token | undefined {
    return this.tokens[this.i];
  }

  private isOp(t: Token | undefined, ...ops: OpToken['op'][]): t is OpToken {
    return t?.kind === 'op' && ops.includes(t.op);
  }

  private parseList(inSubshell: boolean): Pipeline[] {
    const pipelines: Pipeline[] = [];
    for (;;) {
      while (this.isOp(this.peek(), '\n', ';') && pipelines.length > 0) this.i++;
      while (this.isOp(this.peek(), '\n')) this.i++;
      const t = this.peek();
      if (t === undefined || (inSubshell && this.isOp(t, ')'))) break;
      pipelines.push(this.parsePipeline());
      const sep = this.peek();
      if (sep === undefined) break;
      if (this.isOp(sep, '&')) unsupported('background job');
      if (this.isOp(sep, ';', '\n', '&&', '||')) {
        this.i++;
        if (this.isOp(sep, '&&', '||')) {
          while (this.isOp(this.peek(), '\n')) this.i++;
          const after = this.peek();
          if (after === undefined || (after.kind === 'op' && after.op !== '('))
            unsupported('dangling && or ||');
        }
        continue;
      }
      if (inSubshell && this.isOp(sep, ')')) break;
      unsupported('unexpected token after command');
    }
    return pipelines;
  }

  private parsePipeline(): Pipeline {
    const first = this.peek();
    if (first?.kind === 'word' && !first.quoted && first.text === '!') this.i++;
    const commands: Command[] = [this.parseCommand()];
    while (this.isOp(this.peek(), '|', '|&')) {
      this.i++;
      while (this.isOp(this.peek(), '\n')) this.i++;
      commands.push(this.parseCommand());
    }
    return { commands };
  }

  private parseCommand(): Command {
    const t = this.peek();
    if (this.isOp(t, '(')) {
      this.i++;
      const body = this.parseList(true);
      if (!this.isOp(this.peek(), ')')) unsupported('unterminated subshell');
      this.i++;
      if (body.length === 0) unsupported('empty subshell');
      const redirections = this.parseRedirections();
      return { kind: 'subshell', body, redirections };
    }
    const cmd: SimpleCommand = { kind: 'simple', assignments: [], words: [], redirections: [] };
    for (;;) {
      const tok = this.peek();
      if (tok === undefined || tok.kind === 'op') {
        if (this.isOp(tok, '(')) unsupported('parenthesis after a word');
        break;
      }
      if (tok.kind === 'redir') {
        cmd.redirections.push(this.parseRedirection());
        continue;
      }
      this.i++;
      if (cmd.words.length === 0) {
        // NAME= must be unquoted to be an assignment; the value may be quoted or dynamic.
        const m = ASSIGNMENT.exec(tok.raw);
        if (m) {
          cmd.assignments.push({ name: m[1]!, value: { ...tok, text: tok.text.slice(m[0].length) } });
          continue;
        }
        if (!tok.quoted && RESERVED.has(tok.text)) unsupported(`shell keyword ${tok.text}`);
      }
      cmd.words.push(tok);
    }
    if (cmd.words.length === 0 && cmd.assignments.length === 0 && cmd.redirections.length === 0) {
      unsupported('empty command');
    }
    return cmd;
  }

  private parseRedirections(): Redirection[] {
    const out: Redirection[] = [];
    while (this.peek()?.kind === 'redir') out.push(this.parseRedirection());
    return out;
  }

  private parseRedirection(): Redirection {
    const tok = this.tokens[this.i++] as RedirToken;
    const target = this.peek();
    if (target?.kind !== 'word') unsupported('redirection without a target');
    this.i++;
    return { op: tok.op, ...(tok.fd !== undefined ? { fd: tok.fd } : {}), target: target as Word };
  }
}

// ---------------------------------------------------------------- checks

/** Variables that may be set for a read-only command: they change formatting, never what runs. */
const SAFE_ASSIGNMENTS = /^(LC_[A-Z]+|LANG|LANGUAGE|TZ|NO_COLOR|TERM|COLUMNS|LINES|GREP_COLOR|GREP_COLORS)$/;

function redirectionIsReadOnly(r: Redirection): boolean {
  const target = r.target;
  switch (r.op) {
    case '<':
    case '<<<':
      return true; // reading a file or a here-string
    case '<&':
    case '>&':
      // fd duplication (2>&1, >&2, <&0) or closing (>&-); `>& file` would write a file.
      if (!target.dynamic && /^(\d+|-)$/.test(target.text)) return true;
      return r.op === '>&' && !target.dynamic && target.text === '/dev/null';
    case '>':
    case '>>':
    case '>|':
    case '&>':
    case '&>>':
      return !target.dynamic && target.text === '/dev/null';
    default:
      return false; // <> opens for writing; << and <<- are heredocs whose bodies we do not parse
  }
}

type Validator = (args: Word[]) => boolean;

const anyArgs: Validator = () => true;
const staticArgs = (args: Word[]) => args.every((a) => !a.dynamic);

/** Short-option clusters: true when any cluster contains one of `letters` (e.g. `-ni` contains `i`). */
function hasShortFlag(args: Word[], letters: string, valueLetters = ''): boolean {
  for (const a of args) {
    const t = a.text;
    if (t === '--') return false;
    if (!t.startsWith('-') || t.startsWith('--') || t.length < 2) continue;
    for (let k = 1; k < t.length; k++) {
      const ch = t[k]!;
      if (letters.includes(ch)) return true;
      if (valueLetters.includes(ch)) break; // the rest of the cluster is that option's value
    }
  }
  return false;
}

/** Long options may be abbreviated by getopt_long: `--out` means `--output` when unambiguous. */
function hasLongPrefix(args: Word[], ...names: string[]): boolean {
  for (const a of args) {
    if (a.text === '--') return false;
    if (!a.text.startsWith('--') || a.text.length < 3) continue;
    const given = a.text.slice(2).split('=')[0]!;
    for (const n of names) if (n.slice(2).startsWith(given)) return true;
  }
  return false;
}

function positionals(args: Word[], valueOptions: string[] = []): Word[] {
  const out: Word[] = [];
  let endOfOptions = false;
  for (let k = 0; k < args.length; k++) {
    const t = args[k]!.text;
    if (endOfOptions) {
      out.push(args[k]!);
      continue;
    }
    if (t === '--') {
      endOfOptions = true;
      continue;
    }
    if (t.startsWith('-') && t.length > 1) {
      if (valueOptions.includes(t)) k++;
      continue;
    }
    out.push(args[k]!);
  }
  return out;
}

const FIND_WRITERS = new Set(words('-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls'));

const findValidator: Validator = (args) => staticArgs(args) && !args.some((a) => FIND_WRITERS.has(a.text));

/** sed scripts: allow only commands that print or transform the stream; `w`, `W`, `e`, `s///w|e` write or run. */
export function isReadOnlySedScript(script: string): boolean {
  let i = 0;
  const n = script.length;
  const skipSpace = () => {
    while (i < n && /[\s;]/.test(script[i]!)) i++;
  };
  const readDelimited = (delim: string): boolean => {
    // reads up to the unescaped delimiter; i is just past the opening delimiter
    while (i < n) {
      const ch = script[i]!;
      if (ch === '\\') {
        i += 2;
        continue;
      }
      if (ch === '\n' && delim !== '\n') return false;
      if (ch === delim) {
        i++;
        return true;
      }
      i++;
    }
    return false;
  };
  const readAddress = (): boolean => {
    const ch = script[i];
    if (ch === undefined) return true;
    if (/\d/.test(ch)) {
      while (i < n && /[\d~]/.test(script[i]!)) i++;
      return true;
    }
    if (ch === '$') {
      i++;
      return true;
    }
    if (ch === '/') {
      i++;
      if (!readDelimited('/')) return false;
      while (i < n && /[IM]/.test(script[i]!)) i++;
      return true;
    }
    if (ch === '\\') {
      const delim = script[i + 1];
      if (delim === undefined) return false;
      i += 2;
      if (!readDelimited(delim)) return false;
      while (i < n && /[IM]/.test(script[i]!)) i++;
      return true;
    }
    return true;
  };
  for (;;) {
    skipSpace();
    if (i >= n) return true;
    if (script[i] === '}') {
      i++;
      continue;
    }
    if (script[i] === '#') {
      while (i < n && script[i] !== '\n') i++;
      continue;
    }
    if (!readAddress()) return false;
    while (i < n && script[i] === ' ') i++;
    if (script[i] === ',') {
      i++;
      while (i < n && script[i] === ' ') i++;
      if (script[i] === '+' || script[i] === '~') i++;
      if (!readAddress()) return false;
    }
    while (i < n && /[\s!]/.test(script[i]!) && script[i] !== '\n') i++;
    const cmd = script[i];
    if (cmd === undefined) return false;
    i++;
    switch (cmd) {
      case '{':
        continue;
      case 'p':
      case 'P':
      case 'd':
      case 'D':
      case 'n':
      case 'N':
      case 'g':
      case 'G':
      case 'h':
      case 'H':
      case 'x':
      case 'l':
      case '=':
      case 'z':
      case 'F':
        continue;
      case 'q':
      case 'Q':
        while (i < n && /[\d ]/.test(script[i]!)) i++;
        continue;
      case 'b':
      case 't':
      case 'T':
      case ':':
        while (i < n && script[i] !== ';' && script[i] !== '\n' && script[i] !== '}') i++;
        continue;
      case 'a':
      case 'i':
      case 'c':
        // text to the end of the line (GNU one-liner form): output only
        while (i < n && script[i] !== '\n') i++;
        continue;
      case 'y': {
        const delim = script[i];
        if (delim === undefined || delim === '\\' || delim === '\n') return false;
        i++;
        if (!readDelimited(delim) || !readDelimited(delim)) return false;
        continue;
      }
      case 's': {
        const delim = script[i];
        if (delim === undefined || delim === '\\' || delim === '\n') return false;
        i++;
        if (!readDelimited(delim) || !readDelimited(delim)) return false;
        while (i < n && /[gpiImM0-9]/.test(script[i]!)) i++;
        // `w file` and `e` flags write or execute; anything else unknown is refused too.
        if (i < n && !/[\s;}]/.test(script[i]!)) return false;
        continue;
      }
      default:
        return false; // w, W, e, r, R, v and anything unknown
    }
  }
}

const sedValidator: Validator = (args) => {
  if (!staticArgs(args)) return false;
  const scripts: string[] = [];
  let sawScriptOption = false;
  const files: string[] = [];
  for (let k = 0; k < args.length; k++) {
    const t = args[k]!.text;
    if (t === '-e' || t === '--expression') {
      const v = args[++k];
      if (!v) return false;
      scripts.push(v.text);
      sawScriptOption = true;
      continue;
    }
    if (t.startsWith('--expression=')) {
      scripts.push(t.slice('--expression='.length));
      sawScriptOption = true;
      continue;
    }
    if (t.startsWith('-e') && t.length > 2 && !t.startsWith('--')) {
      scripts.push(t.slice(2));
      sawScriptOption = true;
      continue;
    }
    if (t === '--') {
      files.push(...args.slice(k + 1).map((a) => a.text));
      break;
    }
    if (t.startsWith('--')) {
      if (
        ![
          '--quiet',
          '--silent',
          '--regexp-extended',
          '--posix',
          '--debug',
          '--null-data',
          '--zero-terminated',
          '--separate',
          '--unbuffered',
          '--sandbox',
        ].includes(t)
      ) {
        return false; // --in-place, --file, --follow-symlinks, unknown
      }
      continue;
    }
    if (t.startsWith('-') && t.length > 1) {
      // allowed short flags: n (quiet), E/r (extended), s (separate), u (unbuffered), z (null data)
      if (!/^-[nErsuz]+$/.test(t)) return false; // -i (in place), -f (script file), -l, unknown
      continue;
    }
    files.push(t);
  }
  if (!sawScriptOption) {
    const script = files.shift();
    if (script === undefined) return false;
    scripts.push(script);
  }
  return scripts.every(isReadOnlySedScript);
};

const awkValidator: Validator = (args) => {
  if (!staticArgs(args)) return false;
  let program: string | undefined;
  for (let k = 0; k < args.length; k++) {
    const t = args[k]!.text;
    if (t === '-F' || t === '-v') {
      k++;
      continue;
    }
    if (/^-F./.test(t) || /^-v./.test(t)) continue;
    if (t === '--') {
      program = args[k + 1]?.text;
      break;
    }
    if (t.startsWith('-')) return false; // -f progfile, -i inplace, -l/--load, -E, unknown
    program = t;
    break;
  }
  if (program === undefined) return false;
  // Output redirection, pipes, system() and getline-from-command all live in these characters/words.
  return !/[>|]|system|getline|close|fflush|print\s*>/.test(program);
};

const sortValidator: Validator = (args) =>
  staticArgs(args) &&
  !hasShortFlag(args, 'o', 'ktST') &&
  !hasLongPrefix(args, '--output', '--compress-program');

const gitReadOnlySubcommands = new Set(
  words(
    'status log show diff whatchanged shortlog blame annotate grep rev-list rev-parse ' +
      'ls-files ls-tree cat-file describe name-rev merge-base for-each-ref show-ref ' +
      'count-objects var version check-ignore check-attr cherry range-diff show-branch ' +
      'diff-tree diff-files diff-index ls-remote verify-commit verify-tag',
  ),
);

const GIT_BRANCH_WRITERS = words(
  '-d -D --delete -m -M --move -c -C --copy -f --force -u --set-upstream-to ' +
    '--unset-upstream --edit-description -t --track --no-track --create-reflog',
);
const GIT_TAG_WRITERS = words(
  '-d --delete -a --annotate -s --sign -u --local-user -f --force -m --message -F --file -e ' +
    '--edit --create-reflog',
);
const GIT_LIST_VALUE_OPTIONS = words(
  '--contains --no-contains --merged --no-merged --points-at --sort --format',
);

function listingOnly(args: Word[], writers: string[]): boolean {
  for (const a of args) {
    if (writers.includes(a.text) || writers.some((w) => w.startsWith('--') && a.text.startsWith(`${w}=`)))
      return false;
    // combined short flags such as -dr
    if (/^-[A-Za-z]{2,}$/.test(a.text) && [...a.text.slice(1)].some((ch) => writers.includes(`-${ch}`)))
      return false;
  }
  const listing = args.some((a) => a.text === '-l' || a.text === '--list');
  const names = positionals(args, GIT_LIST_VALUE_OPTIONS);
  // Without --list, a name argument creates a branch/tag.
  return listing || names.length === 0;
}

const gitValidator: Validator = (args) => {
  if (!staticArgs(args)) return false;
  let k = 0;
  for (; k < args.length; k++) {
    const t = args[k]!.text;
    if (!t.startsWith('-')) break;
    if (t === '-C' || t === '--git-dir' || t === '--work-tree' || t === '--namespace') {
      k++;
      continue;
    }
    if (/^--(git-dir|work-tree|namespace)=/.test(t)) continue;
    if (
      [
        '--no-pager',
        '-P',
        '--bare',
        '--no-replace-objects',
        '--literal-pathspecs',
        '--glob-pathspecs',
        '--noglob-pathspecs',
        '--icase-pathspecs',
        '--no-optional-locks',
      ].includes(t)
    )
      continue;
    return false; // -c key=value can set core.pager / aliases that run commands; --exec-path; unknown
  }
  const sub = args[k]?.text;
  const rest = args.slice(k + 1);
  if (sub === undefined) return false;
  if (hasLongPrefix(rest, '--output', '--open-files-in-pager')) return false;
  switch (sub) {
    case 'branch':
      return listingOnly(rest, GIT_BRANCH_WRITERS);
    case 'tag':
      return listingOnly(rest, GIT_TAG_WRITERS);
    case 'remote':
      return (
        rest.length === 0 ||
        rest.every((a) => a.text === '-v' || a.text === '--verbose') ||
        ['show', 'get-url'].includes(rest[0]!.text)
      );
    case 'stash':
      return ['list', 'show'].includes(rest[0]?.text ?? '');
    case 'worktree':
      return rest[0]?.text === 'list';
    case 'reflog':
      return (
        rest.length === 0 ||
        ['show', 'exists'].includes(rest[0]!.text) ||
        (rest[0]!.text.startsWith('-') && !rest.some((a) => ['expire', 'delete'].includes(a.text)))
      );
    case 'submodule':
      return rest[0]?.text === 'status';
    case 'notes':
      return ['list', 'show'].includes(rest[0]?.text ?? '');
    case 'config': {
      const reads = [
        '--get',
        '--get-all',
        '--get-regexp',
        '--get-urlmatch',
        '--list',
        '-l',
        '--get-color',
        '--get-colorbool',
      ];
      const writes = [
        '--add',
        '--unset',
        '--unset-all',
        '--replace-all',
        '--rename-section',
        '--remove-section',
        '-e',
        '--edit',
      ];
      if (rest.some((a) => writes.includes(a.text))) return false;
      if (rest.some((a) => reads.includes(a.text))) return true;
      const first = positionals(rest, ['--file', '-f', '--blob', '--type', '--default'])[0]?.text;
      return first === 'get' || first === 'list';
    }
    case 'symbolic-ref':
      return (
        !rest.some((a) => a.text === '-d' || a.text === '--delete' || a.text === '-m') &&
        positionals(rest).length === 1
      );
    case 'grep':
      return !hasShortFlag(rest, 'O');
    default:
      return gitReadOnlySubcommands.has(sub);
  }
};

const dateValidator: Validator = (args) =>
  staticArgs(args) &&
  !hasShortFlag(args, 's', 'dfrI') &&
  !hasLongPrefix(args, '--set') &&
  positionals(args, ['-d', '--date', '-f', '--file', '-r', '--reference']).every((a) =>
    a.text.startsWith('+'),
  );

const treeValidator: Validator = (args) =>
  staticArgs(args) && !args.some((a) => a.text === '-o' || a.text === '-R' || a.text.startsWith('-o'));

const rgValidator: Validator = (args) => staticArgs(args) && !hasLongPrefix(args, '--pre', '--pre-glob');

const fileValidator: Validator = (args) =>
  staticArgs(args) && !hasShortFlag(args, 'C', 'mfFeP') && !hasLongPrefix(args, '--compile');

const uniqValidator: Validator = (args) =>
  staticArgs(args) &&
  positionals(args, ['-f', '-s', '-w', '--skip-fields', '--skip-chars', '--check-chars']).length <= 1;

const base64Validator: Validator = (args) =>
  staticArgs(args) && !hasShortFlag(args, 'o', 'bw') && !hasLongPrefix(args, '--output');

const noArgs: Validator = (args) => args.length === 0;

/** `command -v name` / `command -V name` only look a name up; plain `command x` runs x. */
const commandValidator: Validator = (args) =>
  args.length >= 2 && (args[0]!.text === '-v' || args[0]!.text === '-V');

/** Programs that only read, whatever their arguments (none of their flags writes or runs anything). */
const READ_ONLY_ANY_ARGS = words(
  'cat head tail wc ls pwd echo printf true false whoami id uname stat du df which type ' +
    'basename dirname realpath readlink nl cut tr grep egrep fgrep md5sum sha1sum sha224sum ' +
    'sha256sum sha384sum sha512sum b2sum cksum column fold paste expand unexpand rev tac od ' +
    'hexdump strings seq sleep test [ ps free uptime nproc groups locale getconf cd pushd ' +
    'popd printenv diff cmp comm jq zcat arch tty logname users who pgrep cal look fmt join ' +
    'numfmt tsort expr dirs lsof',
);

const VALIDATORS: Record<string, Validator> = {
  ...Object.fromEntries(READ_ONLY_ANY_ARGS.map((name) => [name, anyArgs])),
  find: findValidator,
  sed: sedValidator,
  awk: awkValidator,
  gawk: awkValidator,
  mawk: awkValidator,
  sort: sortValidator,
  git: gitValidator,
  date: dateValidator,
  tree: treeValidator,
  rg: rgValidator,
  file: fileValidator,
  uniq: uniqValidator,
  base64: base64Validator,
  hostname: noArgs,
  env: noArgs,
  command: commandValidator,
};

const SYSTEM_BIN = /^\/(usr\/(local\/)?)?s?bin\//;

function commandName(word: Word): string | undefined {
  if (word.dynamic) return undefined;
  const name = word.text;
  if (SYSTEM_BIN.test(name)) return name.replace(SYSTEM_BIN, '');
  if (name.includes('/')) return undefined; // ./script or a relative path: could be anything
  return name;
}

/** Checks `words` (program + arguments), unwrapping wrappers such as `time`, `timeout`, `nice`, `xargs`. */
function wordsAreReadOnly(words: Word[], depth = 0): boolean {
  if (depth > 4) return false;
  const first = words[0];
  if (!first) return true;
  const name = commandName(first);
  if (name === undefined) return false;
  const args = words.slice(1);
  switch (name) {
    case 'time':
      return wordsAreReadOnly(
        args.filter((a, k) => !(k === 0 && a.text === '-p')),
        depth + 1,
      );
    case 'nice': {
      let k = 0;
      if (args[0]?.text === '-n') k = 2;
      else if (/^-\d+$/.test(args[0]?.text ?? '') || /^-n\d+$/.test(args[0]?.text ?? '')) k = 1;
      return args.slice(0, k).every((a) => !a.dynamic) && wordsAreReadOnly(args.slice(k), depth + 1);
    }
    case 'timeout': {
      let k = 0;
      while (k < args.length && args[k]!.text.startsWith('-')) {
        const t = args[k]!.text;
        k += t === '-s' || t === '-k' || t === '--signal' || t === '--kill-after' ? 2 : 1;
      }
      if (!args[k] || args[k]!.dynamic) return false;
      return wordsAreReadOnly(args.slice(k + 1), depth + 1);
    }
    case 'xargs':
      return xargsIsReadOnly(args, depth);
    default: {
      const validator = VALIDATORS[name];
      return validator?.(args) === true;
    }
  }
}

const XARGS_VALUE_OPTIONS = new Set(['-n', '-L', '-P', '-s', '-d', '-I', '-E', '-a']);
const XARGS_FLAGS = new Set(['-0', '-r', '-t', '-x', '--null', '--no-run-if-empty', '--verbose', '--exit']);

/** xargs runs a command with extra arguments from stdin: read-only iff that command is, whatever it gets. */
function xargsIsReadOnly(args: Word[], depth: number): boolean {
  let k = 0;
  while (k < args.length) {
    const t = args[k]!.text;
    if (args[k]!.dynamic) return false;
    if (XARGS_FLAGS.has(t)) {
      k++;
      continue;
    }
    if (XARGS_VALUE_OPTIONS.has(t)) {
      k += 2;
      continue;
    }
    if (
      /^-[nLPsdIEa]./.test(t) ||
      /^--(max-args|max-lines|max-procs|max-chars|delimiter|replace|eof|arg-file)=/.test(t)
    ) {
      k++;
      continue;
    }
    if (t.startsWith('-')) return false; // -p/--interactive, -o/--open-tty, unknown
    break;
  }
  const command = args.slice(k);
  if (command.length === 0) return true; // defaults to echo
  const name = commandName(command[0]!);
  // Arguments appended from stdin are unknown: only programs that stay read-only for ANY arguments qualify.
  if (name === undefined || !(name in VALIDATORS) || name === 'command') return false;
  if (VALIDATORS[name] !== anyArgs) {
    // e.g. `xargs grep` is fine, but `xargs sed -n p` could receive `-i` from stdin.
    return false;
  }
  return wordsAreReadOnly(command, depth + 1);
}

function commandIsReadOnly(cmd: Command): boolean {
  if (!cmd.redirections.every(redirectionIsReadOnly)) return false;
  if (cmd.kind === 'subshell') return cmd.body.every(pipelineIsReadOnly);
  for (const a of cmd.assignments) {
    if (!SAFE_ASSIGNMENTS.test(a.name) || a.value.dynamic) return false;
  }
  return wordsAreReadOnly(cmd.words);
}

function pipelineIsReadOnly(p: Pipeline): boolean {
  return p.commands.every(commandIsReadOnly);
}

/** Why a command is not read-only, or undefined when it is. Useful in denial messages and tests. */
export function explainBashCommand(command: string): string | undefined {
  if (command.trim().length === 0) return 'empty command';
  if (command.includes('\0')) return 'NUL byte in command';
  let program: Pipeline[];
  try {
    program = new Parser(lex(command)).parseProgram();
  } catch (e) {
    if (e instanceof Unsupported) return `cannot be analysed: ${e.message}`;
    throw e;
  }
  if (program.length === 0) return 'empty command';
  for (const p of program) {
    for (const c of p.commands) {
      if (!commandIsReadOnly(c)) return describeCommand(c);
    }
  }
  return undefined;
}

function describeCommand(c: Command): string {
  if (c.kind === 'subshell') return 'a subshell contains a command that is not read-only';
  if (!c.redirections.every(redirectionIsReadOnly)) return 'writes through a redirection';
  if (c.assignments.some((a) => !SAFE_ASSIGNMENTS.test(a.name) || a.value.dynamic)) {
    return `sets environment variable ${c.assignments[0]?.name ?? ''}`;
  }
  const name = c.words[0] ? commandName(c.words[0]) : undefined;
  if (name === undefined) return 'the program name is not a plain, known command';
  return name in VALIDATORS
    ? `\`${name}\` is used with arguments that may write or execute`
    : `\`${name}\` is not a known read-only command`;
}

export function isReadOnlyBashCommand(command: string): boolean {
  return explainBashCommand(command) === undefined;
}

/** The commands a read-only Bash policy accepts, for denial messages the model can act on. */
export const READ_ONLY_COMMAND_HINT =
  'ls, find (without -exec/-delete), grep, rg, cat, head, tail, wc, stat, du, sort, uniq, cut, sed -n, jq, ' +
  'git status/log/diff/show';
