import { z } from 'zod';

// Which engine runs BullMQ is decided here and nowhere else (DESIGN §1): Redis in production, or BullMQ's
// PostgreSQL backend when ENGRAM_QUEUE_URL is a postgres:// URL.

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export type QueueBackendConfig =
  | {
      kind: 'redis';
      url: string;
      /** True when neither REDIS_URL nor ENGRAM_QUEUE_URL was set and the default was assumed. */
      implicit: boolean;
    }
  | { kind: 'postgres'; url: string; implicit: false };

export class QueueConfigError extends Error {
  readonly code = 'QUEUE_CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'QueueConfigError';
  }
}

const urlSchema = z.string().trim().min(1);

function parseUrl(name: string, value: string): URL {
  const parsed = urlSchema.safeParse(value);
  try {
    if (!parsed.success) throw new Error('empty');
    return new URL(parsed.data);
  } catch {
    throw new QueueConfigError(
      `${name} is not a valid URL (got ${JSON.stringify(redactUrl(value))}). Use redis://host:6379 or postgres://user:pass@host/db.`,
    );
  }
}

export function resolveBackendConfig(env: NodeJS.ProcessEnv = process.env): QueueBackendConfig {
  const queueUrl = env.ENGRAM_QUEUE_URL?.trim();
  if (queueUrl) {
    const url = parseUrl('ENGRAM_QUEUE_URL', queueUrl);
    if (url.protocol === 'postgres:' || url.protocol === 'postgresql:') {
      return { kind: 'postgres', url: queueUrl, implicit: false };
    }
    if (url.protocol === 'redis:' || url.protocol === 'rediss:')
      return { kind: 'redis', url: queueUrl, implicit: false };
    throw new QueueConfigError(
      `ENGRAM_QUEUE_URL must start with postgres://, postgresql://, redis:// or rediss:// (got ${url.protocol}//…).`,
    );
  }
  const redisUrl = env.REDIS_URL?.trim();
  if (redisUrl) {
    const url = parseUrl('REDIS_URL', redisUrl);
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new QueueConfigError(`REDIS_URL must start with redis:// or rediss:// (got ${url.protocol}//…).`);
    }
    return { kind: 'redis', url: redisUrl, implicit: false };
  }
  return { kind: 'redis', url: DEFAULT_REDIS_URL, implicit: true };
}

/** The URL with any password replaced, for logs and error messages (secrets never go into logs). */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return value.replace(/\/\/([^:/@]+):([^@]+)@/, '//$1:***@');
  }
}
