// Command-line option parsing as getopt_long (and git's parse-options) do it, against a program's option
// table: short clusters (`-Co FILE`: `-C`, then `-o` taking `FILE`), values attached or separate
// (`-oFILE`, `-o FILE`, `--output=FILE`, `--output FILE`), and long-option abbreviations (`--out` means
// `--output` when unambiguous). The classifier asks it which options a command line really uses; an option
// the table does not know, an abbreviation that could mean a denied option, or an ambiguous one is a refusal.
//
// Resolution is deliberately more suspicious than getopt: an abbreviation that matches a denied option is
// refused even when getopt would call it ambiguous, and an option given a value it does not take is refused.

import { EngramError } from '@engram/errors/engram-error';
import type { Arg } from './bash-parse.js';

/**
 * `required`: attached or the next word; `optional`: attached only; `next-unless-option`: attached, or the next
 * word unless that begins with `-` (git's PARSE_OPT_LASTARG_DEFAULT, as in `git branch --contains [COMMIT]`).
 */
export type ArgKind = 'none' | 'required' | 'optional' | 'next-unless-option';

export interface OptionDef {
  /** `o` for `-o`, `output` for `--output`. */
  name: string;
  arg: ArgKind;
  /** Why using this option is not read-only; absent when it is. */
  deny?: string;
  /** Checks the option's value; returns why it is not read-only. */
  check?: (value: Arg | undefined) => string | undefined;
}

export interface OptionTable {
  short: Map<string, OptionDef>;
  long: Map<string, OptionDef>;
  /** `-NUM` is an option (head -20, git log -5). */
  digits: boolean;
  /** `--no-NAME` negates a long option (git's parse-options). */
  negatable: boolean;
  /** No option in the table writes or executes: any option a pattern might expand to is harmless. */
  allSafe: boolean;
}

export interface TableSpec {
  /** Denied options: `-o` / `--output` → reason. Every key must exist in the table. */
  deny?: Record<string, string>;
  check?: Record<string, (value: Arg | undefined) => string | undefined>;
  digits?: boolean;
  negatable?: boolean;
}

/**
 * Builds a table from getopt-style strings: `short` is `ab:c::` (`b` requires a value, `c` takes an
 * optional attached one); `long` is space-separated names, `name=` requiring a value, `name?` an optional one,
 * `name~` one that takes the next word unless it is an option.
 */
export function optionTable(short: string, long: string, spec: TableSpec = {}): OptionTable {
  const shortMap = new Map<string, OptionDef>();
  for (let i = 0; i < short.length; i++) {
    const name = short[i]!;
    let arg: ArgKind = 'none';
    if (short[i + 1] === ':') {
      arg = short[i + 2] === ':' ? 'optional' : 'required';
      i += arg === 'optional' ? 2 : 1;
    }
    shortMap.set(name, { name, arg });
  }
  const longMap = new Map<string, OptionDef>();
  for (const word of long.split(/\s+/).filter(Boolean)) {
    const arg: ArgKind = word.endsWith('=')
      ? 'required'
      : word.endsWith('?')
        ? 'optional'
        : word.endsWith('~')
          ? 'next-unless-option'
          : 'none';
    const name = arg === 'none' ? word : word.slice(0, -1);
    longMap.set(name, { name, arg });
  }
  const lookup = (key: string): OptionDef => {
    const def = key.startsWith('--') ? longMap.get(key.slice(2)) : shortMap.get(key.slice(1));
    if (!def) throw new Error(`option table: ${key} is not in the table`);
    return def;
  };
  for (const [key, reason] of Object.entries(spec.deny ?? {})) lookup(key).deny = reason;
  for (const [key, check] of Object.entries(spec.check ?? {})) lookup(key).check = check;
  const all = [...shortMap.values(), ...longMap.values()];
  return {
    short: shortMap,
    long: longMap,
    digits: spec.digits ?? false,
    negatable: spec.negatable ?? false,
    allSafe: all.every((d) => d.deny === undefined && d.check === undefined),
  };
}

export interface UsedOption {
  def: OptionDef;
  /** As typed, e.g. `--out=x`. */
  given: string;
  value?: Arg;
}

export interface ParsedOptions {
  options: UsedOption[];
  operands: Arg[];
}

export class OptionRefusal extends EngramError {
  constructor(why: string) {
    super('BASH_OPTION_REFUSED', why, { retryable: false });
  }
}

const no = (why: string): never => {
  throw new OptionRefusal(why);
};

const literal = (text: string): Arg => ({ text, exact: true, multi: false, dashSafe: !text.startsWith('-') });

/** Resolves `--given` (without the dashes, before any `=`) to one option of the table. */
export function resolveLong(table: OptionTable, given: string): OptionDef {
  const exact = table.long.get(given);
  if (exact) return exact;
  const matches = [...table.long.values()].filter((d) => d.name.startsWith(given));
  if (matches.length === 0 && table.negatable && given.startsWith('no-') && given.length > 3) {
    const positive = resolveLong(table, given.slice(3));
    if (positive.deny !== undefined || positive.check !== undefined)
      no(`--${given} negates --${positive.name}, which is not read-only`);
    return { name: `no-${positive.name}`, arg: 'none' };
  }
  if (matches.length === 0) return no(`unknown option --${given}`);
  const denied = matches.find((d) => d.deny !== undefined || d.check !== undefined);
  if (matches.length > 1 && denied) no(`--${given} could mean --${denied.name}`);
  if (matches.length > 1 && !matches.every((d) => d.arg === matches[0]!.arg)) no(`--${given} is ambiguous`);
  return matches[0]!;
}

function useOption(
  table: OptionTable,
  out: UsedOption[],
  def: OptionDef,
  given: string,
  value: Arg | undefined,
): void {
  const typed = given.split('=')[0]!;
  const label = typed === `--${def.name}` || typed.length === 2 ? given : `${given} (--${def.name})`;
  if (def.deny !== undefined) no(`${label}: ${def.deny}`);
  if (value?.multi === true && !table.allSafe) {
    // `-k *`: the words after the first become further arguments of unknown shape.
    no(`${given} is given a pattern that may expand to several words`);
  }
  if (def.check) {
    const why = def.check(value);
    if (why !== undefined) no(`${label}: ${why}`);
  }
  out.push(value === undefined ? { def, given } : { def, given, value });
}

/** Splits `args` into the options they use and the operands, refusing what the table does not allow. */
export function parseOptions(
  table: OptionTable,
  args: readonly Arg[],
  { stopAtOperand = false }: { stopAtOperand?: boolean } = {},
): ParsedOptions {
  const options: UsedOption[] = [];
  const operands: Arg[] = [];
  for (let k = 0; k < args.length; k++) {
    const a = args[k]!;
    if (!a.exact) {
      if (a.dashSafe) {
        if (stopAtOperand) {
          operands.push(...args.slice(k));
          break;
        }
        operands.push(a);
        continue;
      }
      // A pattern that may expand to an option: harmless only when no option of the program is denied.
      if (table.allSafe) {
        if (stopAtOperand) {
          operands.push(...args.slice(k));
          break;
        }
        operands.push(a);
        continue;
      }
      no(`\`${a.text}\` may expand to an option`);
    }
    const t = a.text;
    if (t === '--' || (table.negatable && t === '--end-of-options')) {
      operands.push(...args.slice(k + 1));
      break;
    }
    if (t.startsWith('--')) {
      const eq = t.indexOf('=');
      const given = eq < 0 ? t.slice(2) : t.slice(2, eq);
      const def = resolveLong(table, given);
      let value: Arg | undefined;
      if (eq >= 0) {
        if (def.arg === 'none') no(`--${def.name} takes no value`);
        value = literal(t.slice(eq + 1));
      } else if (def.arg === 'required') {
        value = args[++k];
        if (value === undefined) no(`--${def.name} needs a value`);
      } else if (def.arg === 'next-unless-option') {
        const next = args[k + 1];
        if (next && !(next.exact && next.text.startsWith('-'))) {
          if (!next.dashSafe) no(`\`${next.text}\` may expand to an option`);
          value = next;
          k++;
        }
      }
      useOption(table, options, def, t, value);
      continue;
    }
    if (t.startsWith('-') && t.length > 1) {
      for (let i = 1; i < t.length; i++) {
        const ch = t[i]!;
        const def = table.short.get(ch);
        if (!def) {
          if (table.digits && /[0-9]/.test(ch)) {
            while (i + 1 < t.length && /[0-9]/.test(t[i + 1]!)) i++;
            continue;
          }
          no(`unknown option -${ch}${i > 1 ? ` in ${t}` : ''}`);
        }
        const rest = t.slice(i + 1);
        if (def!.arg === 'none') {
          useOption(table, options, def!, `-${ch}`, undefined);
          continue;
        }
        let value: Arg | undefined;
        if (rest.length > 0) value = literal(rest);
        else if (def!.arg === 'required') {
          value = args[++k];
          if (value === undefined) no(`-${ch} needs a value`);
        }
        useOption(table, options, def!, `-${ch}`, value);
        break;
      }
      continue;
    }
    if (stopAtOperand) {
      operands.push(...args.slice(k));
      break;
    }
    operands.push(a);
  }
  return { options, operands };
}
