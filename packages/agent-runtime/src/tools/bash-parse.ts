// Parses a Bash command line with tree-sitter-bash (WASM, through web-tree-sitter) into the small subset
// the read-only classifier can reason about: lists, pipelines and subshells of simple commands whose words
// are plain words and plain quoted strings. Everything else — any expansion (parameter, arithmetic, command,
// process substitution), ANSI-C `$'…'` and locale `$"…"` quoting, heredocs, control structures, functions,
// `[[ ]]`, background jobs, line continuations, parse errors — is "cannot be analysed".
//
// The grammar is loaded once at module load (top-level await: `Parser.init` + `Language.load` on the bytes
// of the `.wasm` file shipped inside the `tree-sitter-bash` npm package), so the classifier's public API
// stays synchronous for every caller.
//
// tree-sitter-bash is not bash: it recovers from errors and disagrees with bash on corner cases (it reads
// `a#b #c` as a word followed by a comment starting at `#b`). So the walk below is an allow-list of node
// types, and two independent checks back it: every character of the input must belong to an accepted token
// or be a space, tab or newline between tokens; and every word is decoded again here, character by
// character, refusing anything that is not a plain character.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { EngramError } from '@engram/errors/engram-error';
import { Language, type Node, Parser } from 'web-tree-sitter';

export class Unanalysable extends EngramError {
  constructor(why: string) {
    super('BASH_UNANALYSABLE', why, { retryable: false });
  }
}

const refuse = (why: string): never => {
  throw new Unanalysable(why);
};

/** One shell word after quote removal. */
export interface Arg {
  /** The word's value when `exact`; otherwise the text as typed (a pattern, `~/x`). */
  text: string;
  /** The value is exactly `text`: no glob, brace or tilde expansion applies. */
  exact: boolean;
  /** May expand to zero or several words (pathname or brace expansion). */
  multi: boolean;
  /** No word it expands to can begin with `-` (its first character is a literal other than `-`). */
  dashSafe: boolean;
}

export interface Redirect {
  /** `>`, `>>`, `>|`, `&>`, `&>>`, `<`, `>&`, `<&`, `>&-`, `<&-`, `<<<`. */
  op: string;
  fd?: string;
  target?: Arg;
}

export interface SimpleCommand {
  assignments: Array<{ name: string; value: Arg }>;
  words: Arg[];
}

export interface ParsedLine {
  /** Every simple command of the line, in source order, at any nesting depth. */
  commands: SimpleCommand[];
  /** Every redirection of the line (on commands and on subshells). */
  redirects: Redirect[];
}

const require = createRequire(import.meta.url);
await Parser.init();
const BASH = await Language.load(readFileSync(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm')));
const parser = new Parser();
parser.setLanguage(BASH);

/** Characters an unquoted word may contain as themselves (besides letters and digits). */
const PLAIN_PUNCTUATION = new Set([...'_-.,/:=+@%^~*?[]{}!#']);

/** Anonymous tokens each container may hold. */
const SEPARATORS: Record<string, ReadonlySet<string>> = {
  program: new Set([';']),
  list: new Set(['&&', '||']),
  pipeline: new Set(['|', '|&']),
  subshell: new Set(['(', ')', ';']),
  negated_command: new Set(['!']),
};

const REDIRECT_OPS = new Set(['>', '>>', '>|', '&>', '&>>', '<', '>&', '<&', '>&-', '<&-']);

export function parseBashLine(source: string): ParsedLine {
  for (const ch of source) {
    const code = ch.charCodeAt(0);
    if ((code < 0x20 && ch !== '\t' && ch !== '\n') || code === 0x7f)
      refuse('control character in the command line');
  }
  if (source.includes('\\\n')) refuse('line continuation');
  const tree = parser.parse(source);
  if (!tree) refuse('the parser gave no tree');
  try {
    const root = tree!.rootNode;
    if (root.hasError) refuse('syntax the parser does not understand');
    const covered = new Uint8Array(source.length);
    const cover = (n: Node) => covered.fill(1, n.startIndex, n.endIndex);
    const out: ParsedLine = { commands: [], redirects: [] };

    const statement = (node: Node): void => {
      switch (node.type) {
        case 'program':
        case 'list':
        case 'pipeline':
        case 'subshell':
        case 'negated_command': {
          const allowed = SEPARATORS[node.type]!;
          for (const child of node.children) {
            if (!child) continue;
            if (!child.isNamed) {
              if (child.type === '&') refuse('background job');
              if (!allowed.has(child.type)) refuse(`operator ${child.type}`);
              cover(child);
            } else if (child.type === 'comment') comment(child);
            else statement(child);
          }
          return;
        }
        case 'redirected_statement': {
          for (const child of node.children) {
            if (!child) continue;
            if (child.type === 'file_redirect' || child.type === 'herestring_redirect') redirect(child);
            else if (child.type === 'heredoc_redirect') refuse('heredoc');
            else if (child.type === 'comment') comment(child);
            else if (child.isNamed) statement(child);
            else refuse(`operator ${child.type}`);
          }
          return;
        }
        case 'command':
          command(node);
          return;
        case 'comment':
          comment(node);
          return;
        default:
          refuse(describeNode(node.type));
      }
    };

    const comment = (node: Node) => {
      // bash starts a comment only at the start of a word; tree-sitter-bash sometimes elsewhere.
      const before = source[node.startIndex - 1];
      if (before !== undefined && !' \t\n;&|()'.includes(before)) refuse('a `#` the parser misreads');
      cover(node);
    };

    const command = (node: Node) => {
      const cmd: SimpleCommand = { assignments: [], words: [] };
      for (const child of node.children) {
        if (!child) continue;
        switch (child.type) {
          case 'variable_assignment': {
            if (cmd.words.length > 0) refuse('assignment after the command name');
            cmd.assignments.push(assignment(child));
            break;
          }
          case 'command_name': {
            const inner = child.namedChildren;
            if (inner.length !== 1 || !inner[0]) refuse('unusual command name');
            cmd.words.push(argument(inner[0]!));
            break;
          }
          case 'file_redirect':
          case 'herestring_redirect':
            redirect(child);
            break;
          case 'heredoc_redirect':
            refuse('heredoc');
            break;
          case 'comment':
            comment(child);
            break;
          default:
            if (!child.isNamed) refuse(`\`${child.type}\` inside a command`);
            if (cmd.words.length === 0) refuse('arguments before the command name');
            cmd.words.push(argument(child));
        }
      }
      if (cmd.words.length === 0) refuse('a command line of assignments only');
      out.commands.push(cmd);
    };

    const assignment = (node: Node): { name: string; value: Arg } => {
      const kids = node.children.filter((c): c is Node => c !== null);
      const [name, eq, value, ...rest] = kids;
      if (name?.type !== 'variable_name' || eq?.type !== '=' || rest.length > 0)
        return refuse('unusual assignment');
      cover(name!);
      cover(eq!);
      return {
        name: name.text,
        value: value ? argument(value) : { text: '', exact: true, multi: false, dashSafe: true },
      };
    };

    const redirect = (node: Node) => {
      const kids = node.children.filter((c): c is Node => c !== null);
      let k = 0;
      let fd: string | undefined;
      if (kids[k]?.type === 'file_descriptor') {
        fd = kids[k]!.text;
        if (!/^\d+$/.test(fd)) refuse('unusual file descriptor');
        cover(kids[k]!);
        k++;
      }
      const op = kids[k];
      if (!op || op.isNamed) return refuse('unusual redirection');
      if (node.type === 'herestring_redirect' ? op.type !== '<<<' : !REDIRECT_OPS.has(op.type))
        refuse(`redirection ${op.type}`);
      cover(op);
      k++;
      const targets = kids.slice(k);
      // tree-sitter-bash attaches words that follow a redirection's target to the redirection.
      if (targets.length > 1) refuse('words after a redirection target');
      const r: Redirect = { op: op.type };
      if (fd !== undefined) r.fd = fd;
      if (targets[0]) r.target = argument(targets[0]);
      else if (op.type !== '>&-' && op.type !== '<&-') refuse('redirection without a target');
      out.redirects.push(r);
    };

    const argument = (node: Node): Arg => {
      const parts = node.type === 'concatenation' ? node.children : [node];
      let text = '';
      let exact = true;
      let multi = false;
      let dashSafe = true;
      // The unquoted characters with their positions in `text`, to find glob / brace / tilde expansions.
      const unquoted: Array<{ ch: string; at: number }> = [];
      parts.forEach((part) => {
        if (!part) return;
        switch (part.type) {
          case 'word':
          case 'number': {
            cover(part);
            const raw = part.text;
            for (let i = 0; i < raw.length; i++) {
              const ch = raw[i]!;
              if (ch === '\\') {
                const next = raw[i + 1];
                if (next === undefined || next === '\n') refuse('a backslash at the end of a word');
                text += next;
                i++;
                continue;
              }
              const code = ch.codePointAt(0)!;
              const plain =
                /[A-Za-z0-9]/.test(ch) || PLAIN_PUNCTUATION.has(ch) || (code >= 0xa0 && code !== 0xfeff);
              if (!plain) refuse(`character ${JSON.stringify(ch)} in a word`);
              unquoted.push({ ch, at: text.length });
              text += ch;
            }
            break;
          }
          case 'raw_string': {
            cover(part);
            const raw = part.text;
            if (!raw.startsWith("'") || !raw.endsWith("'") || raw.length < 2) refuse('unusual quoting');
            text += raw.slice(1, -1);
            break;
          }
          case 'string': {
            for (const c of part.children) {
              if (!c) continue;
              if (c.type !== '"' && c.type !== 'string_content') refuse(describeNode(c.type));
            }
            cover(part);
            const raw = part.text;
            if (!raw.startsWith('"') || !raw.endsWith('"') || raw.length < 2) refuse('unusual quoting');
            const body = raw.slice(1, -1);
            for (let i = 0; i < body.length; i++) {
              const ch = body[i]!;
              if (ch === '$' || ch === '`') refuse('expansion inside double quotes');
              if (ch === '\\') {
                const next = body[i + 1];
                if (next === undefined || next === '\n') refuse('line continuation in a string');
                if ('$`"\\'.includes(next!)) {
                  text += next;
                  i++;
                  continue;
                }
              }
              text += ch;
            }
            break;
          }
          default:
            refuse(describeNode(part.type));
        }
      });
      const firstUnquoted = unquoted[0]?.at === 0 ? unquoted[0].ch : undefined;
      // Pathname expansion: unquoted * ? or a [ … ] pair.
      const positions = unquoted.map((u) => u.ch);
      const glob =
        positions.includes('*') ||
        positions.includes('?') ||
        (positions.includes('[') && positions.lastIndexOf(']') > positions.indexOf('['));
      // Brace expansion: an unquoted { before an unquoted } with a comma or `..` in between.
      const open = unquoted.find((u) => u.ch === '{');
      const close = open && [...unquoted].reverse().find((u) => u.ch === '}' && u.at > open.at);
      const brace =
        open !== undefined && close !== undefined && /,|\.\./.test(text.slice(open.at + 1, close.at));
      // Tilde expansion: a leading unquoted ~, or one right after `=` / `:` in an assignment-shaped word.
      const assignmentShaped = /^[A-Za-z_][A-Za-z0-9_]*=/.test(text);
      const tilde = unquoted.some(
        (u) =>
          u.ch === '~' &&
          (u.at === 0 || (assignmentShaped && (text[u.at - 1] === '=' || text[u.at - 1] === ':'))),
      );
      if (tilde) {
        // Only `~` and `~/…` (the home directory) are understood; `~user`, `~+`, `~-` are not.
        if (firstUnquoted === '~' && !(text === '~' || text.startsWith('~/')))
          refuse('tilde expansion other than ~/');
        exact = false;
      }
      if (glob || brace) {
        exact = false;
        multi = true;
      }
      if (!exact) {
        // A pattern's expansions all begin with its first character when that is a literal other than `-`.
        const first = text[0];
        const firstIsPattern = firstUnquoted !== undefined && '*?[{'.includes(firstUnquoted);
        dashSafe = first !== undefined && first !== '-' && !firstIsPattern;
      }
      return { text, exact, multi, dashSafe };
    };

    statement(root);
    for (let i = 0; i < source.length; i++) {
      if (!covered[i] && !' \t\n'.includes(source[i]!))
        refuse(`text the parser skipped near ${JSON.stringify(source.slice(i, i + 10))}`);
    }
    return out;
  } finally {
    tree!.delete();
  }
}

function describeNode(type: string): string {
  switch (type) {
    case 'command_substitution':
      return 'command substitution';
    case 'process_substitution':
      return 'process substitution';
    case 'arithmetic_expansion':
      return 'arithmetic expansion';
    case 'expansion':
    case 'simple_expansion':
      return 'parameter expansion';
    case 'ansi_c_string':
      return "ANSI-C quoting $'…'";
    case 'translated_string':
      return 'locale quoting $"…"';
    case 'test_command':
      return 'test expression [ ] / [[ ]]';
    case 'function_definition':
      return 'function definition';
    case 'declaration_command':
      return 'declaration (export/declare/local/readonly)';
    case 'variable_assignment':
    case 'variable_assignments':
      return 'a command line of assignments only';
    default:
      return `shell construct ${type.replace(/_/g, ' ')}`;
  }
}
