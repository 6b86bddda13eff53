import matter from 'gray-matter';
import { z } from 'zod';
import { type MemoryType, parseMemoryType } from './memory-types.js';

// Memory files are Markdown with a YAML frontmatter block (name, description, type). Files in the wild vary:
// nested `metadata.type`, extra fields, unquoted dates, non-English text, hand edits. Every one of them must
// load or fail with a typed error naming the file; nothing here may throw anything else.
//
// gray-matter keeps every input it parsed *without options* in a module-level cache forever, and picks a
// parser from the text after the opening `---` (`---js` would eval the block). So it is only ever called with
// a fresh, explicit options object whose non-YAML engines refuse to run, and the delimiter handling is ours.

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

export class MemoryFormatError extends Error {
  override readonly name = 'MemoryFormatError';
  constructor(
    readonly code: MemoryFormatErrorCode,
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
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
  | { kind: 'block'; block: string; bodyStart: number };

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

function refuseEngine(): never {
  throw new Error('only YAML frontmatter is supported');
}

/** A new options object per call: gray-matter caches only option-less calls, and never runs JS/Coffee here. */
function grayMatterOptions() {
  return {
    language: 'yaml',
    excerpt: false,
    engines: {
      javascript: { parse: refuseEngine, stringify: refuseEngine },
      js: { parse: refuseEngine, stringify: refuseEngine },
      coffee: { parse: refuseEngine, stringify: refuseEngine },
      cson: { parse: refuseEngine, stringify: refuseEngine },
      json: { parse: refuseEngine, stringify: refuseEngine },
    },
  };
}

/**
 * Parses a frontmatter block (the text between the delimiters) into a plain object. Simple blocks (the shape
 * the memory prompt teaches) take a fast path proven equal to YAML by property tests; everything else goes
 * through gray-matter/js-yaml. YAML that fails only because an unquoted value contains `: ` or ` #` (common
 * in model-written descriptions) is retried with those values quoted.
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
    data = matter(`---\n${block}\n---\n`, grayMatterOptions()).data;
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
// Characters js-yaml refuses or treats specially anywhere in a block (tabs and CR included: not worth the risk).
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the purpose (js-yaml rejects them).
const UNSAFE_CHARS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\ud800-\udfff\ufeff\ufffe\uffff]/;
// First characters that make a plain scalar something other than a plain string (indicators, signed
// numbers, .inf/.nan, ~ for null) — the fast path leaves those to YAML. Digits are handled below.
const PLAIN_FIRST_UNSAFE = new Set('-?:,[]{}#&*!|>%@`.+~\'"');

// js-yaml's implicit resolution of a plain scalar that starts with a digit: a superset of its integer forms
// and its exact float pattern (both → leave to YAML), and its exact date/timestamp patterns (→ a Date built
// the way js-yaml builds it). Anything else — UUIDs, "3 days" — is a string.
const YAML_INT_SUPERSET = /^(?:0b[01_]*|0x[0-9a-fA-F_]*|[0-9][0-9_]*(?::[0-5]?[0-9])*)$/;
const YAML_FLOAT =
  /^(?:[-+]?(?:0|[1-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;
const YAML_DATE = /^([0-9][0-9][0-9][0-9])-([0-9][0-9])-([0-9][0-9])$/;
const YAML_TIMESTAMP =
  /^([0-9][0-9][0-9][0-9])-([0-9][0-9]?)-([0-9][0-9]?)(?:[Tt]|[ \t]+)([0-9][0-9]?):([0-9][0-9]):([0-9][0-9])(?:\.([0-9]*))?(?:[ \t]*(Z|([-+])([0-9][0-9]?)(?::([0-9][0-9]))?))?$/;

function digitLeadingScalar(value: string): string | Date | undefined {
  if (YAML_INT_SUPERSET.test(value) || YAML_FLOAT.test(value)) return undefined;
  // Dates and timestamps start with four digits and a dash; everything else (UUIDs…) is a string.
  if (value.length < 8 || value.charCodeAt(4) !== 45 /* - */) return value;
  const date = YAML_DATE.exec(value);
  if (date) return new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3])));
  const ts = YAML_TIMESTAMP.exec(value);
  if (!ts) return value;
  const fraction = ts[7] ? Number(ts[7].slice(0, 3).padEnd(3, '0')) : 0;
  const result = new Date(
    Date.UTC(
      Number(ts[1]),
      Number(ts[2]) - 1,
      Number(ts[3]),
      Number(ts[4]),
      Number(ts[5]),
      Number(ts[6]),
      fraction,
    ),
  );
  if (ts[9]) {
    const delta = (Number(ts[10]) * 60 + Number(ts[11] ?? 0)) * 60_000;
    result.setTime(result.getTime() - (ts[9] === '-' ? -delta : delta));
  }
  return result;
}

function isKeyChar(code: number, first: boolean): boolean {
  return (
    (code >= 97 && code <= 122) ||
    (code >= 65 && code <= 90) ||
    code === 95 ||
    (!first && ((code >= 48 && code <= 57) || code === 45))
  );
}

/** Length of a simple key at `start` followed by ':' (or -1). */
function keyLength(line: string, start: number): number {
  let i = start;
  while (i < line.length && isKeyChar(line.charCodeAt(i), i === start)) i++;
  return i > start && line.charCodeAt(i) === 58 /* : */ ? i - start : -1;
}

/** The value a one-line YAML scalar certainly means (a string or a date), or undefined when only YAML can say. */
function simpleScalar(value: string): string | Date | undefined {
  // `value` is already trimmed by the caller.
  if (value === '') return undefined;
  const first = value.charCodeAt(0);
  if (first === 34 /* " */) {
    if (value.length >= 2 && value.charCodeAt(value.length - 1) === 34) {
      const inner = value.slice(1, -1);
      if (!inner.includes('"') && !inner.includes('\\')) return inner;
    }
    return undefined;
  }
  if (first === 39 /* ' */) {
    if (value.length >= 2 && value.charCodeAt(value.length - 1) === 39) {
      const inner = value.slice(1, -1);
      if (!inner.includes("'")) return inner;
    }
    return undefined;
  }
  if (PLAIN_FIRST_UNSAFE.has(value[0] as string)) return undefined;
  if (value.charCodeAt(value.length - 1) === 58 || value.includes(': ') || value.includes(' #'))
    return undefined;
  if (value.length <= 5 && RESERVED_PLAIN.has(value)) return undefined;
  if (first >= 48 && first <= 57) return digitLeadingScalar(value);
  return value;
}

/**
 * Reads blocks made only of `key: value` lines with plain or simply quoted string values, plus one level of
 * `key:` + indented `key: value` lines — the shape memory files almost always have — without a YAML parser.
 * Returns undefined for anything else; property tests check it agrees with js-yaml wherever it answers.
 */
export function parseSimpleFrontmatter(block: string): Record<string, unknown> | undefined {
  if (UNSAFE_CHARS.test(block)) return undefined;
  const data: Record<string, unknown> = {};
  const n = block.length;
  // A `key:` with no value on its line: its value is null or the indented pairs that follow.
  let openKey: string | undefined;
  let nested: Record<string, unknown> | null = null;
  let indent = -1;
  let pos = 0;
  while (pos <= n) {
    let eol = block.indexOf('\n', pos);
    if (eol === -1) eol = n;
    let spaces = 0;
    while (pos + spaces < eol && block.charCodeAt(pos + spaces) === 32) spaces++;
    if (pos + spaces === eol) {
      pos = eol + 1; // blank line
      continue;
    }
    if (spaces > 0) {
      if (openKey === undefined) return undefined;
      if (indent === -1) indent = spaces;
      else if (spaces !== indent) return undefined;
      const keyStart = pos + spaces;
      const keyLen = keyLength(block, keyStart);
      const colon = keyStart + keyLen;
      if (keyLen < 0 || colon + 1 >= eol || block.charCodeAt(colon + 1) !== 32) return undefined;
      const key = block.slice(keyStart, colon);
      nested ??= {};
      if (key === '__proto__' || Object.hasOwn(nested, key)) return undefined;
      const value = simpleScalar(block.slice(colon + 2, eol).trim());
      if (value === undefined) return undefined;
      nested[key] = value;
      pos = eol + 1;
      continue;
    }
    if (openKey !== undefined) {
      data[openKey] = nested;
      openKey = undefined;
      nested = null;
      indent = -1;
    }
    const keyLen = keyLength(block, pos);
    if (keyLen < 0) return undefined;
    const colon = pos + keyLen;
    const key = block.slice(pos, colon);
    if (key === '__proto__' || Object.hasOwn(data, key)) return undefined;
    if (colon + 1 < eol) {
      if (block.charCodeAt(colon + 1) !== 32) return undefined;
      const rest = block.slice(colon + 2, eol).trim();
      if (rest !== '') {
        const value = simpleScalar(rest);
        if (value === undefined) return undefined;
        data[key] = value;
        pos = eol + 1;
        continue;
      }
    }
    openKey = key;
    data[key] = null; // reserves the key's position (YAML keeps insertion order)
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

export interface SerializableMemory extends MemoryFields {
  /** Fields to keep as they are (unknown fields read from an existing file). */
  extra?: Record<string, unknown>;
}

/**
 * The top-level form the memory prompt teaches: name, description, type first, then every other field in
 * its original order. When a nested `metadata.type` exists it is kept in step with `type`, so readers that
 * look there see the same answer. The body is written verbatim (a final newline is ensured).
 */
export function serializeMemoryFile(fields: SerializableMemory, body: string): string {
  const data: Record<string, unknown> = {};
  if (fields.name !== undefined) data.name = singleLine(fields.name);
  if (fields.description !== undefined) data.description = singleLine(fields.description);
  if (fields.type !== undefined) data.type = fields.type;
  for (const [key, value] of Object.entries(fields.extra ?? {})) {
    if (key === 'name' || key === 'description' || key === 'type' || value === undefined) continue;
    data[key] = value;
  }
  if (fields.type !== undefined && isRecord(data.metadata) && 'type' in data.metadata) {
    data.metadata = { ...data.metadata, type: fields.type };
  }
  const yaml = dumpYaml(data);
  const text = yaml === '' ? body : `---\n${yaml}---\n${body}`;
  return text.endsWith('\n') ? text : `${text}\n`;
}

function singleLine(value: string): string {
  return value.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}

function dumpYaml(data: Record<string, unknown>): string {
  if (Object.keys(data).length === 0) return '';
  // gray-matter's stringify with an object file never parses anything; it returns `---\n<yaml>\n---\n\n`.
  const out = matter.stringify({ content: '' }, data, {
    ...grayMatterOptions(),
    // passed through to js-yaml's safeDump: never fold long descriptions, skip undefined values
    lineWidth: -1,
    skipInvalid: true,
  } as Parameters<typeof matter.stringify>[2]);
  const end = out.lastIndexOf('---\n');
  return out.startsWith('---\n') && end > 3 ? out.slice(4, end) : '';
}
