import { LIMITS } from './limits.js';

// A memory path as the SDK documents it: starts with `/`, 1 to 20 segments, no empty, `.` or `..` segment, no
// control or format characters nor U+2028/U+2029, NFC, at most 1,024 bytes. Paths are opaque keys in the
// database; the file side (store-backed team directories) maps them under its own root separately. Rules only:
// the request schemas (schemas.ts) turn a problem into the 400 that names it.

// Cc (control) and Cf (format) characters, and the line/paragraph separators.
const FORBIDDEN = /[\p{Cc}\p{Cf}\u2028\u2029]/u;

/** What is wrong with `path` as a memory path (the refusal's message), or undefined when it is one. */
export function memoryPathProblem(path: string, field = 'path'): string | undefined {
  if (!path.startsWith('/')) return `${field}: must start with "/".`;
  const bytes = Buffer.byteLength(path, 'utf8');
  if (bytes > LIMITS.pathBytes)
    return `${field}: ${bytes} bytes exceeds the limit of ${LIMITS.pathBytes} bytes per path.`;
  if (FORBIDDEN.test(path)) return `${field}: contains a control or format character (or U+2028/U+2029).`;
  if (path.normalize('NFC') !== path) return `${field}: must be in Unicode Normalization Form C.`;
  const segments = path.slice(1).split('/');
  if (segments.length > LIMITS.pathSegments)
    return `${field}: ${segments.length} segments exceeds the limit of ${LIMITS.pathSegments} segments.`;
  for (const seg of segments) {
    if (seg === '') return `${field}: has an empty segment.`;
    if (seg === '.' || seg === '..') return `${field}: a segment cannot be "." or "..".`;
  }
  return undefined;
}

/** A list `path_prefix`: a path that ends with `/` (matched by whole segments), or `/` itself. */
export function pathPrefixProblem(prefix: string): string | undefined {
  if (prefix === '/') return undefined;
  if (!prefix.endsWith('/')) return 'path_prefix: must end with "/".';
  return memoryPathProblem(prefix.slice(0, -1), 'path_prefix');
}

/** The proper ancestors of a path: `/a/b/c.md` → `/a`, `/a/b`. */
export function ancestorsOf(path: string): string[] {
  const segments = path.slice(1).split('/');
  const out: string[] = [];
  for (let i = 1; i < segments.length; i++) out.push(`/${segments.slice(0, i).join('/')}`);
  return out;
}
