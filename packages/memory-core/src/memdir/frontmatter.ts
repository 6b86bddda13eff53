import { EngramError } from '@engram/errors/engram-error';
import { Document, isMap, isScalar, type Pair, parseDocument, Scalar, type YAMLMap } from 'yaml';
import { z } from 'zod';
import { type MemoryType, parseMemoryType } from './memory-types.js';

// Memory files are Markdown with a YAML frontmatter block. Claude Code 2.1.x writes `name` (a slug), a quoted
// `description` and `metadata: {node_type, type, originSessionId, modified}` (docs/claude-code-format.md,
// "Memory files"); files in the wild vary: flat `type`, top-level `originSessionId`, `name: ""`, extra fields,
// non-English text, hand edits, no frontmatter. Every one of them must load or fail with a typed error naming
// the file; nothing here may throw anything else. All YAML goes through the `yaml` library (YAML 1.2 core
// schema, the reading Claude Code's own parser gives); rewrites edit the parsed document's source ranges, so
// everything a change does not mean to touch stays byte-identical.

/** Larger files are not memories (a pasted log, a binary); they are refused rather than parsed. */
export const MAX_MEMORY_FILE_CHARS = 1024 * 1024;
/** A frontmatter block this large is not frontmatter; YAML parsing it would be slow for nothing. */
export const MAX_FRONTMATTER_CHARS = 64 * 1024;

export type MemoryFormatErrorCode =
  | 'NOT_TEXT'
  | 'TOO_LARGE'
  | 'BINARY'
  | 'UNSUPPORTED_LANGUAGE'
  | 'UNTERMINATED'
  | 'FRONTMATTER_TOO_LONG'
  | 'YAML_INVALID'
  | 'NOT_A_MAPPING';

export class MemoryFormatError extends EngramError {
  declare readonly code: MemoryFormatErrorCode;
  constructor(
    code: MemoryFormatErrorCode,
    readonly file: string,
    message: string,
  ) {
    super(code, `${file}: ${message}`, { retryable: false });
  }
}

export interface MemoryFields {
  name?: string;
  description?: string;
  type?: MemoryType;
}

export interface ParsedMemoryFile extends MemoryFields {
  /** Every frontmatter field other than name/description/type (including `metadata`), as parsed. */
  extra: Record<string, unknown>;
  /** Everything after the line that closes the frontmatter (the whole text when there is none). */
  body: string;
  hasFrontmatter: boolean;
  /** True when the YAML only parsed after quoting unquoted values that contain `: ` or ` #`. */
  repairedYaml?: boolean;
}

export function parseMemoryFile(text: string, file: string): ParsedMemoryFile {
  if (typeof text !== 'string') throw new MemoryFormatError('NOT_TEXT', file, 'content is not text.');
  if (text.length > MAX_MEMORY_FILE_CHARS) {
    throw new MemoryFormatError(
      'TOO_LARGE',
      file,
      `file is ${text.length} characters (limit ${MAX_MEMORY_FILE_CHARS}); a memory should be a short note — split it or move the bulk elsewhere.`,
    );
  }
  assertText(text, file);
  const source = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const split = splitFrontmatter(source, file);
  if (split.kind === 'none') return { extra: {}, body: source, hasFrontmatter: false };
  if (split.kind === 'unterminated') {
    throw new MemoryFormatError(
      'UNTERMINATED',
      file,
      'frontmatter opened with "---" is never closed; add a line containing only "---" after the last field.',
    );
  }
  const { data, repaired } = parseFrontmatterBlock(split.block, file);
  const fields = extractMemoryFields(data);
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(data)) {
    if (key !== 'name' && key !== 'description' && key !== 'type') extra[key] = value;
  }
  const parsed: ParsedMemoryFile = {
    ...fields,
    extra,
    body: source.slice(split.bodyStart),
    hasFrontmatter: true,
  };
  if (repaired) parsed.repairedYaml = true;
  return parsed;
}

function assertText(text: string, file: string): void {
  if (text.includes('\0')) {
    throw new MemoryFormatError(
      'BINARY',
      file,
      'file contains NUL bytes; it is binary, not a Markdown memory.',
    );
  }
  // Mostly-undecodable bytes (U+FFFD from a lossy UTF-8 decode) mean binary content too.
  let replacements = 0;
  for (let i = text.indexOf('\ufffd'); i !== -1; i = text.indexOf('\ufffd', i + 1)) replacements++;
  if (replacements > 8 && replacements * 10 > text.length) {
    throw new MemoryFormatError(
      'BINARY',
      file,
      'file is mostly undecodable bytes; it is not UTF-8 Markdown.',
    );
  }
}

// ---------------------------------------------------------------------------------------------------------
// Delimiters

export type FrontmatterSplit =
  | { kind: 'none' }
  | { kind: 'unterminated'; hitLineLimit: boolean }
  | { kind: 'block'; block: string; blockStart: number; bodyStart: number };

const YAML_LANGUAGES = new Set(['', 'yaml', 'yml']);

/**
 * Finds the frontmatter block: the text must open with a `---` line (optionally `---yaml`), and the block ends
 * at the first later line that is exactly `---` (trailing whitespace allowed). `----` or `--- text` on the
 * first line are Markdown, not frontmatter. With `maxLines`, a block not closed within that many lines
 * reports `hitLineLimit`.
 */
export function splitFrontmatter(
  text: string,
  file: string,
  maxLines = Number.POSITIVE_INFINITY,
): FrontmatterSplit {
  if (!text.startsWith('---')) return { kind: 'none' };
  const firstEnd = text.indexOf('\n');
  const firstLine = (firstEnd === -1 ? text : text.slice(0, firstEnd)).replace(/\r$/, '');
  const afterDashes = firstLine.slice(3);
  if (afterDashes.startsWith('-')) return { kind: 'none' };
  const language = afterDashes.trim();
  if (language !== '' && !/^[A-Za-z][\w-]*$/.test(language)) return { kind: 'none' };
  if (!YAML_LANGUAGES.has(language.toLowerCase())) {
    throw new MemoryFormatError(
      'UNSUPPORTED_LANGUAGE',
      file,
      `frontmatter is marked as "${language.slice(0, 20)}"; only YAML frontmatter is read. Remove the language after "---".`,
    );
  }
  if (firstEnd === -1) return { kind: 'unterminated', hitLineLimit: false };
  const blockStart = firstEnd + 1;
  let lineStart = blockStart;
  let lines = 1;
  while (lineStart <= text.length) {
    if (lines >= maxLines) return { kind: 'unterminated', hitLineLimit: true };
    if (lineStart - blockStart > MAX_FRONTMATTER_CHARS) {
      throw new MemoryFormatError(
        'FRONTMATTER_TOO_LONG',
        file,
        `frontmatter is longer than ${MAX_FRONTMATTER_CHARS} characters; keep it to name, description and type.`,
      );
    }
    const nl = text.indexOf('\n', lineStart);
    const lineEnd = nl === -1 ? text.length : nl;
    lines++;
    if (isClosingLine(text, lineStart, lineEnd)) {
      let blockEnd = lineStart > blockStart ? lineStart - 1 : blockStart;
      if (blockEnd > blockStart && text.charCodeAt(blockEnd - 1) === 13) blockEnd--;
      return {
        kind: 'block',
        block: text.slice(blockStart, blockEnd),
        blockStart,
        bodyStart: nl === -1 ? text.length : nl + 1,
      };
    }
    if (nl === -1) break;
    lineStart = nl + 1;
  }
  return { kind: 'unterminated', hitLineLimit: false };
}

function isClosingLine(text: string, start: number, end: number): boolean {
  if (end - start < 3 || !text.startsWith('---', start)) return false;
  for (let i = start + 3; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 13) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// The YAML block

/** Aliases expanded per document before it counts as an alias bomb. */
const MAX_ALIAS_COUNT = 100;

/**
 * Parses a frontmatter block (the text between the delimiters) into a plain object. Simple blocks (the shape
 * the memory prompt teaches) are read by a small reader that property tests hold equal to the `yaml`
 * library wherever it answers (it runs on every recall, for up to 200 files); everything else goes through
 * `yaml`. YAML that fails only because an unquoted value contains `: ` or ` #` (common in model-written
 * descriptions) is retried with those values quoted.
 */
export function parseFrontmatterBlock(
  block: string,
  file: string,
): { data: Record<string, unknown>; repaired: boolean } {
  if (block.includes('\0')) {
    throw new MemoryFormatError('BINARY', file, 'frontmatter contains NUL bytes.');
  }
  if (block.length > MAX_FRONTMATTER_CHARS) {
    throw new MemoryFormatError(
      'FRONTMATTER_TOO_LONG',
      file,
      `frontmatter is longer than ${MAX_FRONTMATTER_CHARS} characters; keep it to name, description and type.`,
    );
  }
  const fast = parseSimpleFrontmatter(block);
  if (fast !== undefined) return { data: fast, repaired: false };
  try {
    return { data: parseYamlStrict(block, file), repaired: false };
  } catch (error) {
    if (!(error instanceof MemoryFormatError) || error.code !== 'YAML_INVALID') throw error;
    const repairedBlock = quoteAmbiguousValues(block);
    if (repairedBlock === block) throw error;
    try {
      return { data: parseYamlStrict(repairedBlock, file), repaired: true };
    } catch {
      throw error;
    }
  }
}

function parseYamlStrict(block: string, file: string): Record<string, unknown> {
  // A top-level line starting with `---` inside the block would be a second YAML document.
  if (/(^|\n)---/.test(block)) {
    throw new MemoryFormatError('YAML_INVALID', file, 'frontmatter contains a second "---" line; remove it.');
  }
  let data: unknown;
  try {
    const doc = parseDocument(block, { prettyErrors: false, uniqueKeys: true });
    const first = doc.errors[0];
    if (first) throw first;
    data = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    const detail =
      error instanceof Error ? (error.message.split('\n')[0] ?? '').slice(0, 200) : 'unknown error';
    throw new MemoryFormatError(
      'YAML_INVALID',
      file,
      `frontmatter is not valid YAML (${detail}); quote values that contain ": " or start with a special character.`,
    );
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data) || data instanceof Date) {
    throw new MemoryFormatError(
      'NOT_A_MAPPING',
      file,
      'frontmatter is not a set of "key: value" fields; write it as name:, description:, type: lines.',
    );
  }
  return data as Record<string, unknown>;
}

const TOP_LEVEL_PAIR = /^([A-Za-z_][A-Za-z0-9_-]*):[ \t]+(.*?)[ \t]*$/;

/** Quotes top-level plain values that YAML would misread (`description: fix: use X`, `a #b`). */
function quoteAmbiguousValues(block: string): string {
  return block
    .split('\n')
    .map((line) => {
      const match = TOP_LEVEL_PAIR.exec(line.replace(/\r$/, ''));
      if (!match) return line;
      const [, key, value = ''] = match;
      if (value === '' || /^["'[{|>&*!%@`]/.test(value)) return line;
      if (!value.includes(': ') && !value.includes(' #') && !value.endsWith(':')) return line;
      return `${key}: ${JSON.stringify(value)}`;
    })
    .join('\n');
}

// ---------------------------------------------------------------------------------------------------------
// Fast path for the common shape:
//   name: Plain text
//   description: "quoted text"
//   type: feedback
//   metadata:
//     node_type: memory
// Returns undefined for anything it is not certain YAML would read the same way.

const RESERVED_PLAIN = new Set(['null', 'Null', 'NULL', 'true', 'True', 'TRUE', 'false', 'False', 'FALSE']);
// Characters YAML refuses or treats specially anywhere in a block (tabs and CR included: not worth the risk).
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the purpose (YAML rejects them).
const UNSAFE_CHARS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\ud800-\udfff\ufeff\ufffe\uffff]/;
// First characters that make a plain scalar something other than a plain string (indicators, signed
// numbers, .inf/.nan, ~ for null) — the fast path leaves those to YAML. Digits are handled below.
const PLAIN_FIRST_UNSAFE = new Set('-?:,[]{}#&*!|>%@`.+~\'"');

// The YAML 1.2 core schema's reading of a plain scalar that starts with a digit: its integer and float forms
// (→ leave to YAML); anything else — UUIDs, timestamps, dates, "3 days" — is a string.
export const YAML_INT = /^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$/;
export const YAML_FLOAT = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;

// Character classes of the reader, by code unit below 128: bit 1 = may start a key, bit 2 = may continue a key,
// bit 4 = makes a plain scalar something other than a plain string when it comes first (PLAIN_FIRST_UNSAFE).
const CLASS = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c);
  if (/[A-Za-z_]/.test(ch)) CLASS[c] = (CLASS[c] as number) | 1 | 2;
  if (/[0-9-]/.test(ch)) CLASS[c] = (CLASS[c] as number) | 2;
  if (PLAIN_FIRST_UNSAFE.has(ch)) CLASS[c] = (CLASS[c] as number) | 4;
}

/**
 * True when block[from, to), which starts with a digit, is a YAML 1.2 core-schema int or float (YAML_INT or
 * YAML_FLOAT): digits; `0o` + octal or `0x` + hex digits; digits, an optional `.` and digits, an optional
 * exponent. One pass that stops at the first character no number can have there (a UUID stops at its `-`).
 */
export function isCoreNumber(block: string, from: number, to: number): boolean {
  let i = from;
  while (i < to && isDigit(block.charCodeAt(i))) i++;
  if (i === to) return true;
  let c = block.charCodeAt(i);
  if (i === from + 1 && block.charCodeAt(from) === 48 /* 0 */ && (c === 111 /* o */ || c === 120) /* x */) {
    const hex = c === 120;
    let j = i + 1;
    if (j === to) return false;
    for (; j < to; j++) {
      const d = block.charCodeAt(j);
      const ok = hex ? isDigit(d) || (d >= 97 && d <= 102) || (d >= 65 && d <= 70) : d >= 48 && d <= 55;
      if (!ok) return false;
    }
    return true;
  }
  if (c === 46 /* . */) {
    i++;
    while (i < to && isDigit(block.charCodeAt(i))) i++;
    if (i === to) return true;
    c = block.charCodeAt(i);
  }
  if (c !== 101 /* e */ && c !== 69 /* E */) return false;
  i++;
  if (i < to && (block.charCodeAt(i) === 43 || block.charCodeAt(i) === 45)) i++;
  const digits = i;
  while (i < to && isDigit(block.charCodeAt(i))) i++;
  return i === to && i > digits;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** The string a one-line YAML scalar certainly means, or undefined when only YAML can say. */
function simpleScalar(value: string): string | undefined {
  return scalarAt(value, 0, value.length);
}

/**
 * The string the one-line scalar block[from, to) certainly means (the caller has stripped surrounding spaces),
 * or undefined when only YAML can say. Searches are native (`indexOf`); `scan` says which characters the
 * block contains at all, so most checks cost nothing.
 */
function scalarAt(block: string, from: number, to: number, scan: BlockScan = FULL_SCAN): string | undefined {
  if (from >= to) return undefined;
  const first = block.charCodeAt(from);
  const last = block.charCodeAt(to - 1);
  if (first === 34 /* " */ || first === 39 /* ' */) {
    if (to - from < 2 || last !== first) return undefined;
    // The first quote after the opening one must be the closing one; no escapes in double quotes.
    if (block.indexOf(first === 34 ? '"' : "'", from + 1) !== to - 1) return undefined;
    if (first === 34 && scan.backslash) {
      const backslash = block.indexOf('\\', from + 1);
      if (backslash !== -1 && backslash < to) return undefined;
    }
    return block.slice(from + 1, to - 1);
  }
  if (first < 128 && ((CLASS[first] as number) & 4) !== 0) return undefined;
  if (last === 58 /* : */) return undefined;
  const colonSpace = block.indexOf(': ', from);
  if (colonSpace !== -1 && colonSpace < to) return undefined;
  if (scan.hash) {
    const comment = block.indexOf(' #', from);
    if (comment !== -1 && comment < to) return undefined;
  }
  const value = block.slice(from, to);
  const length = to - from;
  // null/true/false in their three spellings: 4 or 5 letters starting with n, t or f in either case.
  if ((length === 4 || length === 5) && (first | 0x20) >= 102 && RESERVED_PLAIN.has(value)) return undefined;
  if (first >= 48 && first <= 57 && isCoreNumber(block, from, to)) return undefined;
  return value;
}

/** Which characters that need a closer look occur anywhere in a block (`#`: any, not only after a space). */
export interface BlockScan {
  backslash: boolean;
  hash: boolean;
}
const FULL_SCAN: BlockScan = { backslash: true, hash: true };

/**
 * Field names memory files use: valid plain keys, none of them reserved. The reader recognises them in place
 * (no slice, no hashing) and stores the literal, so the common block costs no string-table lookups.
 */
const KNOWN_KEYS = [
  'name',
  'description',
  'type',
  'metadata',
  'node_type',
  'originSessionId',
  'modified',
  'updated',
  'supersedes',
] as const;
const KNOWN_BY_LENGTH: number[][] = [];
KNOWN_KEYS.forEach((key, index) => {
  const list = KNOWN_BY_LENGTH[key.length] ?? [];
  list.push(index);
  KNOWN_BY_LENGTH[key.length] = list;
});

/** Index in KNOWN_KEYS of `key`, or -1. */
function knownKeyIndex(key: string): number {
  const candidates = KNOWN_BY_LENGTH[key.length];
  if (candidates === undefined) return -1;
  for (const index of candidates) if (key === KNOWN_KEYS[index]) return index;
  return -1;
}

/** True when block[from, to) is a simple key: a letter or `_`, then letters, digits, `_` or `-`. */
function isSimpleKey(block: string, from: number, to: number): boolean {
  if (to <= from) return false;
  const first = block.charCodeAt(from);
  if (first >= 128 || ((CLASS[first] as number) & 1) === 0) return false;
  for (let i = from + 1; i < to; i++) {
    const c = block.charCodeAt(i);
    if (c >= 128 || ((CLASS[c] as number) & 2) === 0) return false;
  }
  return true;
}

/**
 * Reads blocks made only of `key: value` lines with plain or simply quoted string values, plus one level of
 * `key:` + indented `key: value` lines — the shape memory files almost always have — without a YAML parser.
 * Returns undefined for anything else; property tests check it agrees with `yaml` wherever it answers.
 * `asciiScan`: the caller has checked that the block holds only printable ASCII and newlines, and says
 * whether it holds a backslash or a `#` (the scan learns all of it in the pass that finds the block).
 */
export function parseSimpleFrontmatter(
  block: string,
  asciiScan?: BlockScan,
): Record<string, unknown> | undefined {
  if (asciiScan === undefined && UNSAFE_CHARS.test(block)) return undefined;
  const scan: BlockScan = asciiScan ?? { backslash: block.includes('\\'), hash: block.includes(' #') };
  const data: Record<string, unknown> = {};
  const n = block.length;
  // A `key:` with no value on its line: its value is null or the indented pairs that follow.
  let openKey: string | undefined;
  let nested: Record<string, unknown> | null = null;
  let topSeen = 0;
  let nestedSeen = 0;
  let indent = -1;
  let pos = 0;
  while (pos <= n) {
    let eol = block.indexOf('\n', pos);
    if (eol === -1) eol = n;
    let keyStart = pos;
    while (keyStart < eol && block.charCodeAt(keyStart) === 32) keyStart++;
    if (keyStart === eol) {
      pos = eol + 1; // blank line
      continue;
    }
    const spaces = keyStart - pos;
    if (spaces > 0) {
      if (openKey === undefined) return undefined;
      if (indent === -1) indent = spaces;
      else if (spaces !== indent) return undefined;
    } else if (openKey !== undefined) {
      data[openKey] = nested;
      openKey = undefined;
      nested = null;
      nestedSeen = 0;
      indent = -1;
    }
    const colon = block.indexOf(':', keyStart);
    if (colon === -1 || colon >= eol) return undefined;
    if (spaces > 0) nested ??= {};
    const target = spaces > 0 ? (nested as Record<string, unknown>) : data;
    let key = block.slice(keyStart, colon);
    const known = knownKeyIndex(key);
    if (known !== -1) {
      // Stored under the literal (no string-table lookup); duplicates of known keys are tracked in a bit set
      // per map (one for the top level, one for `nested`).
      key = KNOWN_KEYS[known] as string;
      const bit = 1 << known;
      if (spaces > 0) {
        if (nestedSeen & bit) return undefined;
        nestedSeen |= bit;
      } else {
        if (topSeen & bit) return undefined;
        topSeen |= bit;
      }
    } else {
      if (!isSimpleKey(block, keyStart, colon)) return undefined;
      // `null:` is a null key to YAML; `true:`/`false:` are booleans: only YAML knows how they come out.
      if (key === '__proto__' || RESERVED_PLAIN.has(key) || Object.hasOwn(target, key)) return undefined;
    }
    let from = colon + 1;
    if (from < eol) {
      if (block.charCodeAt(from) !== 32) return undefined;
      while (from < eol && block.charCodeAt(from) === 32) from++;
    }
    let to = eol;
    while (to > from && block.charCodeAt(to - 1) === 32) to--;
    if (from === to) {
      if (spaces > 0) return undefined; // `  key:` with nothing after it: a null or a deeper map
      openKey = key;
      data[key] = null; // reserves the key's position (YAML keeps insertion order)
    } else {
      const value = scalarAt(block, from, to, scan);
      if (value === undefined) return undefined;
      target[key] = value;
    }
    pos = eol + 1;
  }
  if (openKey !== undefined) data[openKey] = nested;
  return data;
}

// ---------------------------------------------------------------------------------------------------------
// Fields

function scalarToText(value: unknown): string | undefined {
  if (typeof value === 'string') {
    const trimmed = value.trim();
    return trimmed === '' ? undefined : trimmed;
  }
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) return undefined;
    const iso = value.toISOString();
    // An unquoted `2024-05-01` is a YAML timestamp at UTC midnight: give back the date the user wrote.
    return iso.endsWith('T00:00:00.000Z') ? iso.slice(0, 10) : iso;
  }
  return undefined;
}

const textField = z.preprocess(scalarToText, z.string().optional()).catch(undefined);

/** The known frontmatter fields. Wrong-typed values degrade to undefined instead of failing the file. */
export const MemoryFrontmatterSchema = z.looseObject({
  name: textField,
  description: textField,
  type: z.unknown().transform(parseMemoryType).optional(),
  metadata: z.unknown().optional(),
});

/** name/description/type from parsed frontmatter; `type` falls back to `metadata.type` (newer Claude Code). */
export function extractMemoryFields(data: Record<string, unknown>): MemoryFields {
  // Fast lane for the overwhelmingly common all-strings shape (the scan calls this for every file); property
  // tests check it answers exactly as the schema does.
  const { name, description, type, metadata } = data;
  if (
    (name === undefined || typeof name === 'string') &&
    (description === undefined || typeof description === 'string') &&
    (type === undefined || typeof type === 'string') &&
    (metadata === undefined || metadata === null || isRecord(metadata))
  ) {
    const fields: MemoryFields = {};
    const trimmedName = name?.trim();
    if (trimmedName) fields.name = trimmedName;
    const trimmedDescription = description?.trim();
    if (trimmedDescription) fields.description = trimmedDescription;
    const parsedType =
      parseMemoryType(type) ?? (isRecord(metadata) ? parseMemoryType(metadata.type) : undefined);
    if (parsedType !== undefined) fields.type = parsedType;
    return fields;
  }
  return extractMemoryFieldsWithSchema(data);
}

/** The schema-only path (exported for the equivalence tests). */
export function extractMemoryFieldsWithSchema(data: Record<string, unknown>): MemoryFields {
  const result = MemoryFrontmatterSchema.safeParse(data);
  if (!result.success) return {};
  const parsed = result.data;
  const fields: MemoryFields = {};
  if (parsed.name !== undefined) fields.name = parsed.name;
  if (parsed.description !== undefined) fields.description = parsed.description;
  let type = parsed.type;
  if (type === undefined && isRecord(parsed.metadata)) type = parseMemoryType(parsed.metadata.type);
  if (type !== undefined) fields.type = type;
  return fields;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

// ---------------------------------------------------------------------------------------------------------
// Writing

/** What Engram maintains in `metadata` on every write, as Claude Code does after each Write/Edit. */
export interface MemoryStamp {
  /** The session whose work wrote the file. */
  originSessionId?: string;
  /** ISO timestamp of the write. */
  modified: string;
}

export interface SerializableMemory extends MemoryFields {
  /** Further top-level fields for a new file (an existing file keeps its own; see rewriteMemoryFile). */
  extra?: Record<string, unknown>;
  stamp?: MemoryStamp;
}

export const MEMORY_NODE_TYPE = 'memory';

function singleLine(value: string): string {
  return value.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}

type ScalarStyle = 'plain' | 'double' | 'single';

/** One YAML scalar for `value`: in `style` when it reads back as the same string, else double-quoted. */
function scalarText(value: string, style: ScalarStyle): string {
  if (style === 'single' && !/[\r\n]/.test(value)) return `'${value.replace(/'/g, "''")}'`;
  if (style === 'plain' && value !== '' && simpleScalar(value) === value && !UNSAFE_CHARS.test(value)) {
    return value;
  }
  return JSON.stringify(value);
}

function styleOf(node: unknown): ScalarStyle {
  if (!isScalar(node)) return 'plain';
  if (node.type === Scalar.QUOTE_DOUBLE) return 'double';
  if (node.type === Scalar.QUOTE_SINGLE) return 'single';
  return 'plain';
}

/**
 * A new memory file in the current form (docs/claude-code-format.md, "Memory files"): `name`, a quoted
 * one-line `description`, `metadata` with `node_type: memory`, `type`, `originSessionId` and `modified`, then
 * any extra fields. The body is written verbatim (a final newline is ensured).
 */
export function serializeMemoryFile(fields: SerializableMemory, body: string): string {
  const lines: string[] = [];
  if (fields.name !== undefined) lines.push(`name: ${scalarText(singleLine(fields.name), 'plain')}`);
  if (fields.description !== undefined) {
    lines.push(`description: ${scalarText(singleLine(fields.description), 'double')}`);
  }
  const extra = { ...(fields.extra ?? {}) };
  for (const key of ['name', 'description', 'type']) delete extra[key];
  const extraMetadata = isRecord(extra.metadata) ? extra.metadata : undefined;
  if (extraMetadata) delete extra.metadata;
  const metadata: Array<[string, string]> = [];
  if (fields.type !== undefined || fields.stamp !== undefined || extraMetadata) {
    metadata.push(['node_type', MEMORY_NODE_TYPE]);
    if (fields.type !== undefined) metadata.push(['type', fields.type]);
    if (fields.stamp?.originSessionId) metadata.push(['originSessionId', fields.stamp.originSessionId]);
    if (fields.stamp) metadata.push(['modified', fields.stamp.modified]);
  }
  if (metadata.length > 0 || extraMetadata) {
    lines.push('metadata:');
    for (const [key, value] of metadata) lines.push(`  ${key}: ${scalarText(value, 'plain')}`);
    const known = new Set(metadata.map(([key]) => key));
    const rest = Object.fromEntries(Object.entries(extraMetadata ?? {}).filter(([k]) => !known.has(k)));
    if (Object.keys(rest).length > 0) {
      for (const line of dumpYaml(rest).trimEnd().split('\n')) lines.push(`  ${line}`);
    }
  }
  const defined = Object.fromEntries(Object.entries(extra).filter(([, v]) => v !== undefined));
  if (Object.keys(defined).length > 0) lines.push(dumpYaml(defined).trimEnd());
  const text = lines.length === 0 ? body : `---\n${lines.join('\n')}\n---\n${body}`;
  return text.endsWith('\n') ? text : `${text}\n`;
}

function dumpYaml(data: Record<string, unknown>): string {
  return new Document(data).toString({ lineWidth: 0 });
}

export interface FrontmatterChanges extends MemoryFields {
  stamp?: MemoryStamp;
}

interface Edit {
  start: number;
  end: number;
  text: string;
}

function findPair(map: YAMLMap, key: string): Pair | undefined {
  return map.items.find((p) => isScalar(p.key) && p.key.value === key) as Pair | undefined;
}

/**
 * Applies `changes` to a memory file's text, editing only the source of the values that change and inserting
 * lines for fields that are missing: every other byte of the frontmatter (unknown fields, order, quoting,
 * comments) and the body stay as they are, unless `body` replaces it. Placement follows what the file already
 * has: `type` goes where the file keeps it (`metadata.type`, else a flat `type`, else a new `metadata.type`);
 * `stamp` maintains `metadata.node_type`, `metadata.modified` and `originSessionId` (top level when the file
 * keeps it there). A file without frontmatter gets one in the current form. Throws MemoryFormatError when the
 * existing frontmatter is not YAML.
 */
export function rewriteMemoryFile(
  text: string,
  changes: FrontmatterChanges,
  file: string,
  body?: string,
): string {
  const bom = text.charCodeAt(0) === 0xfeff ? '\ufeff' : '';
  const source = bom ? text.slice(1) : text;
  const split = splitFrontmatter(source, file);
  if (split.kind === 'unterminated') {
    throw new MemoryFormatError('UNTERMINATED', file, 'frontmatter opened with "---" is never closed.');
  }
  if (split.kind === 'none') {
    return bom + serializeMemoryFile(changes, body ?? source);
  }
  const block = split.block;
  const doc = parseDocument(block, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new MemoryFormatError(
      'YAML_INVALID',
      file,
      `frontmatter is not valid YAML (${doc.errors[0]?.message.split('\n')[0]}).`,
    );
  }
  const root = doc.contents;
  if (root !== null && (!isMap(root) || root.flow)) {
    throw new MemoryFormatError('NOT_A_MAPPING', file, 'frontmatter is not a block of "key: value" fields.');
  }
  const eol = block.includes('\r\n') ? '\r\n' : '\n';
  const edits: Edit[] = [];
  const lineStart = (offset: number) => block.lastIndexOf('\n', offset - 1) + 1;
  const afterLine = (offset: number) => {
    const nl = block.indexOf('\n', offset);
    return nl === -1 ? block.length : nl + 1;
  };
  const indentOf = (offset: number) => offset - lineStart(offset);
  const insertAt = (at: number, lines: string[]) => {
    const joined = lines.join(eol);
    if (at >= block.length) {
      const needsBreak = block !== '' && !block.endsWith('\n');
      edits.push({ start: block.length, end: block.length, text: `${needsBreak ? eol : ''}${joined}` });
    } else edits.push({ start: at, end: at, text: `${joined}${eol}` });
  };
  const endOfMap = (map: YAMLMap) => {
    const last = map.items.at(-1) as Pair | undefined;
    if (!last) return block.length;
    const node = (last.value ?? last.key) as { range?: [number, number, number] } | null;
    const end = node?.range?.[1] ?? block.length;
    return afterLine(Math.max(end - 1, 0));
  };
  /** Sets an existing pair's value; false when the pair holds something other than a scalar. */
  const setPair = (pair: Pair, value: string, style?: ScalarStyle): boolean => {
    const node = pair.value;
    if (isScalar(node) && node.range) {
      if (node.value === value) return true;
      const [start, end] = node.range;
      const written = scalarText(value, style ?? styleOf(node));
      if (start === end) {
        // `key:` with nothing after it
        const keyEnd = (pair.key as Scalar).range?.[1] ?? start;
        const colon = block.indexOf(':', keyEnd);
        edits.push({ start: colon + 1, end: colon + 1, text: ` ${written}` });
      } else edits.push({ start, end, text: written });
      return true;
    }
    if (node === null && isScalar(pair.key) && pair.key.range) {
      const colon = block.indexOf(':', pair.key.range[1]);
      edits.push({ start: colon + 1, end: colon + 1, text: ` ${scalarText(value, style ?? 'plain')}` });
      return true;
    }
    return false;
  };

  const top = root as YAMLMap | null;
  const topStart: string[] = [];
  const topEnd: string[] = [];
  const topIndent =
    top?.items[0] && isScalar(top.items[0].key) && top.items[0].key.range
      ? ' '.repeat(indentOf(top.items[0].key.range[0]))
      : '';
  const setTop = (key: string, value: string, style: ScalarStyle | undefined, where: 'start' | 'end') => {
    const pair = top ? findPair(top, key) : undefined;
    if (pair && setPair(pair, value, style)) return;
    if (pair)
      throw new MemoryFormatError('NOT_A_MAPPING', file, `frontmatter field "${key}" is not a single value.`);
    (where === 'start' ? topStart : topEnd).push(
      `${topIndent}${key}: ${scalarText(value, style ?? 'plain')}`,
    );
  };
  if (changes.name !== undefined) setTop('name', singleLine(changes.name), undefined, 'start');
  if (changes.description !== undefined) {
    const pair = top ? findPair(top, 'description') : undefined;
    const current = pair && isScalar(pair.value) ? pair.value.value : undefined;
    const value = singleLine(changes.description);
    if (current !== value) setTop('description', value, 'double', 'start');
  }

  const metadataPair = top ? findPair(top, 'metadata') : undefined;
  const metadata =
    metadataPair && isMap(metadataPair.value) && !metadataPair.value.flow ? metadataPair.value : undefined;
  const metadataUsable =
    metadataPair === undefined ||
    metadata !== undefined ||
    (isScalar(metadataPair.value) && metadataPair.value.value === null) ||
    metadataPair.value === null;
  const metaInserts: string[] = [];
  const setMeta = (key: string, value: string, topLevelIfThere: boolean) => {
    const inMeta = metadata ? findPair(metadata, key) : undefined;
    if (inMeta && setPair(inMeta, value)) return;
    const atTop = top ? findPair(top, key) : undefined;
    if ((topLevelIfThere && atTop) || !metadataUsable) {
      setTop(key, value, undefined, 'end');
      return;
    }
    metaInserts.push(`${key}: ${scalarText(value, 'plain')}`);
  };
  if (changes.type !== undefined) {
    const inMeta = metadata ? findPair(metadata, 'type') : undefined;
    const flat = top ? findPair(top, 'type') : undefined;
    if (!inMeta && flat) setTop('type', changes.type, undefined, 'end');
    else setMeta('type', changes.type, false);
  }
  if (changes.stamp) {
    const nodeType = metadata ? findPair(metadata, 'node_type') : undefined;
    if (!nodeType && metadataUsable) metaInserts.unshift(`node_type: ${MEMORY_NODE_TYPE}`);
    if (changes.stamp.originSessionId) setMeta('originSessionId', changes.stamp.originSessionId, true);
    setMeta('modified', changes.stamp.modified, true);
  }
  if (metaInserts.length > 0) {
    if (metadata && metadata.items.length > 0) {
      const firstKey = (metadata.items[0] as Pair).key as Scalar;
      const indent = ' '.repeat(firstKey.range ? indentOf(firstKey.range[0]) : topIndent.length + 2);
      insertAt(
        endOfMap(metadata),
        metaInserts.map((l) => `${indent}${l}`),
      );
    } else if (metadataPair) {
      // `metadata:` with nothing under it: the new lines go right below the key.
      const keyStart = (metadataPair.key as Scalar).range?.[0] ?? 0;
      insertAt(
        afterLine(keyStart),
        metaInserts.map((l) => `${topIndent}  ${l}`),
      );
    } else {
      topEnd.push(`${topIndent}metadata:`, ...metaInserts.map((l) => `${topIndent}  ${l}`));
    }
  }
  if (topStart.length > 0) {
    // New `name`/`description` lines open the block — a new description goes right below an existing name.
    const namePair = top ? findPair(top, 'name') : undefined;
    const nameEnd =
      (namePair?.value as Scalar | null)?.range?.[1] ?? (namePair?.key as Scalar | undefined)?.range?.[1];
    const first = top?.items[0]?.key as Scalar | undefined;
    const at =
      namePair && nameEnd !== undefined ? afterLine(nameEnd) : first?.range ? lineStart(first.range[0]) : 0;
    insertAt(at, topStart);
  }
  if (topEnd.length > 0) insertAt(top ? endOfMap(top) : block.length, topEnd);

  let next = block;
  for (const edit of edits.sort((a, b) => b.start - a.start || 0)) {
    next = next.slice(0, edit.start) + edit.text + next.slice(edit.end);
  }
  // An empty block sits directly before the closing line: new lines need their own line end.
  if (block === '' && next !== '') next += eol;
  const head = source.slice(0, split.blockStart);
  const tail = source.slice(split.blockStart + block.length, split.bodyStart);
  const out = bom + head + next + tail + (body ?? source.slice(split.bodyStart));
  return body !== undefined && !out.endsWith('\n') ? `${out}\n` : out;
}
