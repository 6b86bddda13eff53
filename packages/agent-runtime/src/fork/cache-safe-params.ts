import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';
import type { SystemBlock, ToolDefinition } from '../model/types.js';

// The parts of the parent's request that a fork must repeat byte for byte to share its prompt cache:
// model, system prompt, tool definitions, user context and max_tokens (changing max_tokens can change
// the thinking budget and with it the cache key). The foreground saves them per session; a worker in
// another process or on another machine loads them. Messages are not here: they are rebuilt from the
// transcript.

export const cacheSafeParamsSchema = z.object({
  model: z.string().min(1),
  system: z.array(z.looseObject({ type: z.literal('text'), text: z.string() })),
  tools: z.array(
    z.looseObject({
      name: z.string().min(1),
      description: z.string(),
      input_schema: z.record(z.string(), z.unknown()),
    }),
  ),
  userContext: z.string().optional(),
  maxTokens: z.number().int().positive(),
});

export interface CacheSafeParams {
  model: string;
  system: SystemBlock[];
  tools: ToolDefinition[];
  userContext?: string;
  maxTokens: number;
}

export type CacheSafeParamsErrorCode = 'CACHE_SAFE_PARAMS_MISSING' | 'CACHE_SAFE_PARAMS_INVALID';

/** The session's saved parameters are missing or unusable: a job cannot fork with them until a turn rewrites them. */
export class CacheSafeParamsError extends EngramError {
  declare readonly code: CacheSafeParamsErrorCode;
  constructor(code: CacheSafeParamsErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { retryable: false, ...options });
  }
}

/** Where a session's parameters live: beside its transcript, `<projectDir>/<sessionId>/cache-safe-params.json`. */
export function cacheSafeParamsPathFor(transcriptPath: string): string {
  return join(dirname(transcriptPath), sessionDirName(transcriptPath), 'cache-safe-params.json');
}

/** `<projectDir>/<sessionId>/tool-results`, the directory for persisted large tool results. */
export function toolResultsDirFor(transcriptPath: string): string {
  return join(dirname(transcriptPath), sessionDirName(transcriptPath), 'tool-results');
}

function sessionDirName(transcriptPath: string): string {
  const base = transcriptPath.slice(dirname(transcriptPath).length + 1);
  return base.endsWith('.jsonl') ? base.slice(0, -'.jsonl'.length) : base;
}

/** Strips cache_control markers: they are the client's business, never part of the saved identity. */
function withoutCacheControl<T extends object>(block: T): T {
  const { cache_control: _ignored, ...rest } = block as T & { cache_control?: unknown };
  return rest as T;
}

export async function saveCacheSafeParams(path: string, params: CacheSafeParams): Promise<void> {
  const clean: CacheSafeParams = {
    model: params.model,
    system: params.system.map(withoutCacheControl),
    tools: params.tools.map(withoutCacheControl),
    ...(params.userContext !== undefined ? { userContext: params.userContext } : {}),
    maxTokens: params.maxTokens,
  };
  cacheSafeParamsSchema.parse(clean);
  await writeFileAtomic(path, `${JSON.stringify(clean)}\n`, { mode: 0o600, dirMode: 0o700 });
}

export async function loadCacheSafeParams(path: string): Promise<CacheSafeParams> {
  let text: string;
  try {
    text = await fs.readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CacheSafeParamsError(
        'CACHE_SAFE_PARAMS_MISSING',
        `No cache-safe parameters at ${path}: the foreground saves them after its first model call; run the fork after that.`,
        { cause: e },
      );
    }
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CacheSafeParamsError(
      'CACHE_SAFE_PARAMS_INVALID',
      `Cache-safe parameters at ${path} are not JSON.`,
      { cause: e },
    );
  }
  const parsed = cacheSafeParamsSchema.safeParse(json);
  if (!parsed.success) {
    throw new CacheSafeParamsError(
      'CACHE_SAFE_PARAMS_INVALID',
      `Cache-safe parameters at ${path} are invalid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  // The validated JSON as written, not zod's rebuilt copy: key order is kept exactly as the parent sent it.
  return json as CacheSafeParams;
}
