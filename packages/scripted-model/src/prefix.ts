import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';

// How the scripted server and the tests see a Messages API request: as the ordered sequence of blocks the
// prompt cache keys on (tools, then system, then every message content block), with `cache_control`
// markers removed from identity but remembered as breakpoints.

export interface MessagesRequestBody {
  model: string;
  max_tokens?: number;
  system?: string | Array<Record<string, unknown>>;
  tools?: Array<Record<string, unknown>>;
  messages: Array<{ role: string; content: string | Array<Record<string, unknown>> }>;
  stream?: boolean;
  cache_control?: unknown;
  output_config?: { format?: { type: string; schema?: unknown } | null } | null;
  [key: string]: unknown;
}

export function stripCacheControl<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => stripCacheControl(v)) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (k === 'cache_control') continue;
      out[k] = stripCacheControl(v);
    }
    return out as T;
  }
  return value;
}

function hasCacheControl(value: unknown): boolean {
  return !!value && typeof value === 'object' && 'cache_control' in (value as object);
}

export function normalizeSystem(system: MessagesRequestBody['system']): Array<Record<string, unknown>> {
  if (system === undefined) return [];
  if (typeof system === 'string') return system.length ? [{ type: 'text', text: system }] : [];
  return system;
}

export function normalizeContent(
  content: string | Array<Record<string, unknown>>,
): Array<Record<string, unknown>> {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

export interface CacheBlock {
  /** What the cache keys on: the block without cache_control, tagged with where it sits. */
  key: string;
  tokens: number;
  breakpoint: boolean;
}

/** Rough but stable token estimate: 4 characters per token, as the runtime's own estimator uses. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export function requestBlocks(body: MessagesRequestBody): CacheBlock[] {
  const blocks: CacheBlock[] = [];
  const push = (tag: string, value: unknown) => {
    const key = `${tag}:${JSON.stringify(stripCacheControl(value))}`;
    blocks.push({ key, tokens: estimateTokens(key), breakpoint: hasCacheControl(value) });
  };
  for (const tool of body.tools ?? []) push('tool', tool);
  for (const block of normalizeSystem(body.system)) push('system', block);
  body.messages.forEach((message, i) => {
    for (const block of normalizeContent(message.content)) push(`${message.role}#${i}`, block);
  });
  // Top-level `cache_control` (automatic caching) places the breakpoint on the last block.
  if (body.cache_control && blocks.length > 0) blocks[blocks.length - 1]!.breakpoint = true;
  return blocks;
}

export function prefixHashes(model: string, blocks: CacheBlock[]): string[] {
  const hashes: string[] = [];
  let h = createHash('sha256').update(`model:${model}`).digest('hex');
  for (const block of blocks) {
    h = createHash('sha256').update(h).update(block.key).digest('hex');
    hashes.push(h);
  }
  return hashes;
}

export interface PrefixComparison {
  sameModel: boolean;
  sameSystem: boolean;
  sameTools: boolean;
  /** How many leading messages of `a` appear unchanged at the start of `b`. */
  commonMessages: number;
  /** True when every message of `a` is a prefix of `b`'s messages (ignoring cache_control). */
  aIsPrefixOfB: boolean;
  /** Index of the first message that differs, when `aIsPrefixOfB` is false. */
  firstDifferentMessage?: number;
}

/**
 * Compares two requests the way the prompt cache does: model, system, tools and message prefix, ignoring
 * `cache_control` markers and the string-vs-text-block spelling of the same content.
 */
export function comparePrefix(a: MessagesRequestBody, b: MessagesRequestBody): PrefixComparison {
  const norm = (m: MessagesRequestBody['messages'][number]) => ({
    role: m.role,
    content: stripCacheControl(normalizeContent(m.content)),
  });
  let common = 0;
  while (
    common < a.messages.length &&
    common < b.messages.length &&
    isDeepStrictEqual(norm(a.messages[common]!), norm(b.messages[common]!))
  ) {
    common++;
  }
  const aIsPrefixOfB = common === a.messages.length;
  return {
    sameModel: a.model === b.model,
    sameSystem: isDeepStrictEqual(
      stripCacheControl(normalizeSystem(a.system)),
      stripCacheControl(normalizeSystem(b.system)),
    ),
    sameTools: isDeepStrictEqual(stripCacheControl(a.tools ?? []), stripCacheControl(b.tools ?? [])),
    commonMessages: common,
    aIsPrefixOfB,
    ...(aIsPrefixOfB ? {} : { firstDifferentMessage: common }),
  };
}
