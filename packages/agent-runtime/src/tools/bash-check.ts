// The vocabulary the read-only classifier's program tables are written in (bash-readonly.ts walks the line,
// bash-programs.ts and bash-git.ts hold the per-program tables): a refusal, a check of one program's
// arguments, and the small builders the tables use.

import { EngramError } from '@engram/errors/engram-error';
import { type OptionTable, parseOptions } from './bash-options.js';
import type { Arg } from './bash-parse.js';

/** The classifier's verdict "not read-only" (the command needs a prompt in the foreground), with the reason. */
export class NotReadOnly extends EngramError {
  constructor(why: string) {
    super('BASH_NOT_READ_ONLY', why, { retryable: false });
  }
}

export const deny = (why: string): never => {
  throw new NotReadOnly(why);
};

/** Lists below are written as space-separated words to stay readable. */
export function words(list: string): string[] {
  return list.split(/\s+/).filter(Boolean);
}

export interface Context {
  depth: number;
  /** Checks a wrapped command line (`time`, `nice`, `timeout`, `xargs`): the walk's own entry point. */
  checkWords(cmdWords: Arg[], ctx: Context): void;
}

/** Returns normally when the program with these arguments only reads; throws NotReadOnly otherwise. */
export type Check = (args: Arg[], ctx: Context) => void;

export const allArgsAreWords: Check = () => {};

/** Options from `table`; operands are files or other inputs read (any number, patterns allowed). */
export const withOptions =
  (table: OptionTable, operands?: (ops: Arg[], parsed: ReturnType<typeof parseOptions>) => void): Check =>
  (args) => {
    const parsed = parseOptions(table, args);
    operands?.(parsed.operands, parsed);
  };

export const noOperands = (ops: Arg[]) => {
  if (ops.length > 0) deny('an operand here changes state');
};

export const atMostOperands = (n: number) => (ops: Arg[]) => {
  if (ops.some((o) => o.multi) || ops.length > n) deny(`more than ${n} operand(s): the next one is written`);
};

const SYSTEM_BIN = /^\/(usr\/(local\/)?)?s?bin\//;

/** A program named by a plain word or a system bin path; undefined for a script path (could be anything). */
export function programName(text: string): string | undefined {
  if (SYSTEM_BIN.test(text)) return text.replace(SYSTEM_BIN, '');
  if (text.includes('/')) return undefined; // ./script or a relative path: could be anything
  return text;
}
