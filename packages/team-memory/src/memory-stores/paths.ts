import { invalid } from './errors.js';
import { LIMITS } from './limits.js';

// A memory path as the SDK documents it: starts with `/`, 1 to 20 segments, no empty, `.` or `..` segment, no
// control or format characters nor U+2028/U+2029, NFC, at most 1,024 bytes. Paths are opaque keys in the
// database; the file side (store-backed team directories) maps them under its own root separately.

// Cc (control) and Cf (format) characters, and the line/paragraph separators.
const FORBIDDEN = /[\p{Cc}\p{Cf}\u2028\u2029]/u;

export function validateMemoryPath(path: unknown, field = 'path'): string {
  if (typeof path !== 'string') throw invalid(`${field}: must be a string.`);
  if (!path.startsWith('/')) throw invalid(`${field}: must start with "/".`);
  const bytes = Buffer.byteLength(path, 'utf8');
  if (bytes > LIMITS.pathBytes)
    throw invalid(`${field}: ${bytes} bytes exceeds the limit of ${LIMITS.pathBytes} bytes per path.`);
  if (FORBIDDEN.test(path))
    throw invalid(`${field}: contains a control or format character (or U+2028/U+2029).`);
  if (path.normalize('NFC') !== path) throw invalid(`${field}: must be in Unicode Normalization Form C.`);
  const segments = path.slice(1).split('/');
  if (segments.length > LIMITS.pathSegments)
    throw invalid(
      `${field}: ${segments.length} segments exceeds the limit of ${LIMITS.pathSegments} segments.`,
    );
  for (const seg of segments) {
    if (seg === '') throw invalid(`${field}: has an empty segment.`);
    if (seg === '.' || seg === '..') throw invalid(`${field}: a segment cannot be "." or "..".`);
  }
  return path;
}

/** A list `path_prefix`: a path that ends with `/` (matched by whole segments), or `/` itself. */
export function validatePathPrefix(prefix: string): string {
  if (prefix === '/') return prefix;
  if (!prefix.endsWith('/')) throw invalid('path_prefix: must end with "/".');
  validateMemoryPath(prefix.slice(0, -1), 'path_prefix');
  return prefix;
}

/** The proper ancestors of a path: `/a/b/c.md` → `/a`, `/a/b`. */
export function ancestorsOf(path: string): string[] {
  const segments = path.slice(1).split('/');
  const out: string[] = [];
  for (let i = 1; i < segments.length; i++) out.push(`/${segments.slice(0, i).join('/')}`);
  return out;
}
