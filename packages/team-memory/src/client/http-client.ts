import { EngramError } from '@engram/errors/engram-error';
import {
  ERROR_CODES,
  errorBodySchema,
  formatEntityTag,
  parseEntityTag,
  TEAM_MEMORY_PATH,
  type TeamMemoryData,
  teamMemoryDataSchema,
  teamMemoryHashesSchema,
  tooManyEntriesSchema,
  VIEW_HASHES,
} from '../contract.js';

// The client side of the wire contract: three calls (full GET with If-None-Match, view=hashes, PUT with
// If-Match), each answering a typed outcome. Transient failures (network, timeout, 5xx, 408, 429) are retried
// with backoff; everything else is a TeamSyncHttpError whose `permanent` says whether retrying can help.

export type TeamSyncErrorKind = 'auth' | 'timeout' | 'network' | 'parse' | 'http' | 'route';

/** A 4xx other than 408/409/429, or a response we cannot read: retrying the same request cannot succeed. */
function isPermanentTeamSyncFailure(kind: TeamSyncErrorKind, status: number | undefined): boolean {
  if (kind === 'auth' || kind === 'parse') return true;
  if (status === undefined) return false;
  return status >= 400 && status < 500 && ![408, 409, 429].includes(status);
}

export class TeamSyncHttpError extends EngramError {
  constructor(
    readonly kind: TeamSyncErrorKind,
    message: string,
    readonly status?: number,
    /** `error.details.error_code` from the service, when it sent one (the code then, else `TEAM_SYNC_<KIND>`). */
    readonly errorCode?: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(errorCode ?? `TEAM_SYNC_${kind.toUpperCase()}`, message, {
      retryable: !isPermanentTeamSyncFailure(kind, status),
    });
  }

  /** Retrying the same request cannot succeed (the opposite of `retryable`). */
  get permanent(): boolean {
    return !this.retryable;
  }
}

export type FetchOutcome =
  | { kind: 'data'; data: TeamMemoryData; checksum: string }
  | { kind: 'not-modified' }
  | { kind: 'empty' };

export type HashesOutcome =
  | { kind: 'hashes'; checksum: string; version: number; entryChecksums: Record<string, string> }
  | { kind: 'empty' };

export type PutOutcome =
  | { kind: 'ok'; checksum: string; version: number | undefined }
  | { kind: 'conflict' }
  | { kind: 'too-many-entries'; maxEntries: number; receivedEntries: number };

export interface TeamMemoryHttpClientOptions {
  /** Service origin, e.g. https://engram.example.com (the path is added). */
  baseUrl: string;
  /** The tenant's API key, sent as a bearer token. */
  apiKey: string;
  /** Per request (default 30 s). */
  timeoutMs?: number;
  /** Retries of transient failures (default 3). */
  maxRetries?: number;
  /** Base of the exponential backoff (default 500 ms). */
  retryBaseMs?: number;
  userAgent?: string;
}

export class TeamMemoryHttpClient {
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly retryBaseMs: number;

  constructor(private readonly options: TeamMemoryHttpClientOptions) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.retryBaseMs = options.retryBaseMs ?? 500;
  }

  endpoint(repo: string, view?: 'hashes'): string {
    const url = new URL(TEAM_MEMORY_PATH, this.options.baseUrl);
    url.searchParams.set('repo', repo);
    if (view) url.searchParams.set('view', view);
    return url.toString();
  }

  async fetchData(repo: string, etag?: string): Promise<FetchOutcome> {
    const res = await this.send(
      'GET',
      this.endpoint(repo),
      etag ? { 'If-None-Match': formatEntityTag(etag) } : {},
    );
    if (res.status === 304) return { kind: 'not-modified' };
    if (res.status === 404) return this.emptyOrMissingRoute(res);
    const body = await this.expectOk(res);
    const parsed = teamMemoryDataSchema.safeParse(body);
    if (!parsed.success)
      throw new TeamSyncHttpError('parse', 'The team memory response is not in the expected shape.', 200);
    const checksum = parsed.data.checksum || parseEntityTag(res.headers.get('etag') ?? '');
    return { kind: 'data', data: parsed.data, checksum };
  }

  async fetchHashes(repo: string): Promise<HashesOutcome> {
    const res = await this.send('GET', this.endpoint(repo, VIEW_HASHES), {});
    if (res.status === 404) return this.emptyOrMissingRoute(res);
    const body = await this.expectOk(res);
    const parsed = teamMemoryHashesSchema.safeParse(body);
    if (!parsed.success) {
      throw new TeamSyncHttpError(
        'parse',
        'The service did not return entryChecksums for ?view=hashes.',
        200,
      );
    }
    return {
      kind: 'hashes',
      checksum: parsed.data.checksum || parseEntityTag(res.headers.get('etag') ?? ''),
      version: parsed.data.version,
      entryChecksums: parsed.data.entryChecksums,
    };
  }

  /**
   * A 404 means "no team memory yet" only when the service says so (`team_memory_not_found`); any other 404 is
   * a server without the route (not mounted, wrong URL) — an error, so the caller keeps its sync state.
   */
  private async emptyOrMissingRoute(res: Response): Promise<{ kind: 'empty' }> {
    const body = await res.json().catch(() => undefined);
    const parsed = errorBodySchema.safeParse(body);
    if (parsed.success && parsed.data.error.details?.error_code === ERROR_CODES.notFound)
      return { kind: 'empty' };
    throw new TeamSyncHttpError(
      'route',
      `The server at ${this.options.baseUrl} has no team memory route (404 ${TEAM_MEMORY_PATH}); check the URL, or ` +
        'that the server serves team memory.',
      404,
    );
  }

  async put(repo: string, entries: Record<string, string>, ifMatch: string | undefined): Promise<PutOutcome> {
    const res = await this.send(
      'PUT',
      this.endpoint(repo),
      { 'Content-Type': 'application/json', ...(ifMatch ? { 'If-Match': formatEntityTag(ifMatch) } : {}) },
      JSON.stringify({ entries }),
    );
    if (res.status === 412) {
      await res.body?.cancel();
      return { kind: 'conflict' };
    }
    if (res.status === 413) {
      const body = await res.json().catch(() => undefined);
      const tooMany = tooManyEntriesSchema.safeParse(body);
      if (tooMany.success) {
        return {
          kind: 'too-many-entries',
          maxEntries: tooMany.data.error.details.max_entries,
          receivedEntries: tooMany.data.error.details.received_entries,
        };
      }
      throw httpError(413, body);
    }
    const body = (await this.expectOk(res)) as { checksum?: unknown; version?: unknown } | undefined;
    const checksum =
      typeof body?.checksum === 'string' && body.checksum
        ? body.checksum
        : parseEntityTag(res.headers.get('etag') ?? '');
    return { kind: 'ok', checksum, version: typeof body?.version === 'number' ? body.version : undefined };
  }

  private async expectOk(res: Response): Promise<unknown> {
    const body = await res.json().catch(() => undefined);
    if (res.status !== 200) throw httpError(res.status, body);
    if (body === undefined)
      throw new TeamSyncHttpError('parse', 'The team memory response is not JSON.', 200);
    return body;
  }

  /** One request with retries of transient failures; answers any response that is not transient. */
  private async send(
    method: 'GET' | 'PUT',
    url: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<Response> {
    let lastError: TeamSyncHttpError | undefined;
    for (let attempt = 0; attempt <= this.maxRetries; attempt++) {
      if (attempt > 0) await sleep(retryDelay(this.retryBaseMs, attempt));
      try {
        const res = await fetch(url, {
          method,
          headers: {
            Authorization: `Bearer ${this.options.apiKey}`,
            Accept: 'application/json',
            'User-Agent': this.options.userAgent ?? 'engram-team-sync',
            ...headers,
          },
          ...(body !== undefined ? { body } : {}),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        if (res.status >= 500 || res.status === 408 || res.status === 429) {
          lastError = httpError(res.status, await res.json().catch(() => undefined));
          continue;
        }
        return res;
      } catch (error) {
        const name = (error as Error).name;
        lastError =
          name === 'TimeoutError' || name === 'AbortError'
            ? new TeamSyncHttpError(
                'timeout',
                `The team memory service did not answer within ${this.timeoutMs} ms.`,
              )
            : new TeamSyncHttpError(
                'network',
                `Cannot reach the team memory service (${(error as Error).message}).`,
              );
      }
    }
    throw lastError ?? new TeamSyncHttpError('network', 'Cannot reach the team memory service.');
  }
}

function httpError(status: number, body: unknown): TeamSyncHttpError {
  const parsed = errorBodySchema.safeParse(body);
  const message = parsed.success ? parsed.data.error.message : undefined;
  const details = parsed.success ? parsed.data.error.details : undefined;
  const kind: TeamSyncErrorKind = status === 401 || status === 403 ? 'auth' : 'http';
  return new TeamSyncHttpError(
    kind,
    `The team memory service answered ${status}${message ? `: ${message}` : '.'}`,
    status,
    typeof details?.error_code === 'string' ? details.error_code : undefined,
    details,
  );
}

function retryDelay(baseMs: number, attempt: number): number {
  const exp = Math.min(baseMs * 2 ** (attempt - 1), 8_000);
  return exp * (0.5 + Math.random());
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
