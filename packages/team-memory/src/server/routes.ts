import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  DEFAULT_MAX_ENTRIES,
  DEFAULT_MAX_REQUEST_BYTES,
  ERROR_CODES,
  formatEntityTag,
  MAX_ENTRY_BYTES,
  parseEntityTag,
  putBodySchema,
  repoSlug,
  TEAM_MEMORY_PATH,
  VIEW_HASHES,
} from '../contract.js';
import { invalidKeyReason } from '../keys.js';
import type { RepoMeta, TeamMemoryStore } from './store.js';

// The team memory endpoints as plain node:http handlers, for the hosted API to mount behind its own
// authentication: it resolves the tenant from the request's key and passes it in `ctx`. Scope comes only from
// that tenant and the `repo` query parameter; nothing in the body can name another tenant or repository.

export interface TeamMemoryRouteContext {
  /** The authenticated tenant (from the API key, never from the request). */
  tenant: { id: string };
  /** The request URL, parsed against the server's origin. */
  url: URL;
}

export interface TeamMemoryRoute {
  method: 'GET' | 'PUT';
  path: string;
  handler(req: IncomingMessage, res: ServerResponse, ctx: TeamMemoryRouteContext): Promise<void>;
}

export interface TeamMemoryLimits {
  /** Largest entry, in UTF-8 bytes of its content (default 250,000). */
  maxEntryBytes: number;
  /** Largest PUT body, in bytes (default 1 MiB). */
  maxRequestBytes: number;
  /** Entries one repository may hold (default 2,000). */
  maxEntries: number;
  /** Repositories one tenant may hold (default 100). */
  maxRepositoriesPerTenant: number;
  /** Bytes of entry content one tenant may hold over all its repositories (default 50 MiB). */
  maxBytesPerTenant: number;
}

export const DEFAULT_LIMITS: TeamMemoryLimits = {
  maxEntryBytes: MAX_ENTRY_BYTES,
  maxRequestBytes: DEFAULT_MAX_REQUEST_BYTES,
  maxEntries: DEFAULT_MAX_ENTRIES,
  maxRepositoriesPerTenant: 100,
  maxBytesPerTenant: 50 * 1024 * 1024,
};

export interface TeamMemoryRoutesOptions {
  store: TeamMemoryStore;
  limits?: Partial<TeamMemoryLimits>;
  /** Told about each request's outcome (for the host's logs and metrics); never given entry contents. */
  onEvent?: (event: TeamMemoryEvent) => void;
}

export interface TeamMemoryEvent {
  tenantId: string;
  repo: string | undefined;
  method: 'GET' | 'PUT';
  status: number;
  view?: 'full' | 'hashes';
  changedKeys?: number;
  errorCode?: string;
}

export function teamMemoryRoutes(options: TeamMemoryRoutesOptions): TeamMemoryRoute[] {
  const limits: TeamMemoryLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const { store } = options;
  const emit = (e: TeamMemoryEvent) => options.onEvent?.(e);

  const get: TeamMemoryRoute['handler'] = async (req, res, ctx) => {
    const repo = readRepo(ctx.url);
    const view = ctx.url.searchParams.get('view');
    const hashesView = view === VIEW_HASHES;
    if (!repo.ok) return finish(sendError(res, 400, 'invalid_request_error', repo.message, repo.details));
    if (view !== null && view !== VIEW_HASHES) {
      return finish(
        sendError(res, 400, 'invalid_request_error', `Unknown view "${view}"; the only view is "hashes".`, {
          error_code: ERROR_CODES.invalidView,
        }),
      );
    }
    const data = hashesView
      ? await store.hashes(ctx.tenant.id, repo.repo)
      : await store.get(ctx.tenant.id, repo.repo);
    if (!data) {
      return finish(
        sendError(res, 404, 'not_found_error', `No team memory for ${repo.repo} yet.`, {
          error_code: ERROR_CODES.notFound,
        }),
      );
    }
    const etag = formatEntityTag(data.checksum);
    if (!hashesView && matchesIfNoneMatch(req.headers['if-none-match'], data.checksum)) {
      res.writeHead(304, { ETag: etag, 'Cache-Control': 'no-cache' });
      res.end();
      return finish(304);
    }
    const body = hashesView
      ? { ...metadata(data), entryChecksums: data.entryChecksums }
      : {
          ...metadata(data),
          content: {
            entries: 'entries' in data ? data.entries : {},
            entryChecksums: data.entryChecksums,
          },
        };
    sendJson(res, 200, body, { ETag: etag, 'Cache-Control': 'no-cache' });
    return finish(200);

    function finish(status: number): void {
      emit({
        tenantId: ctx.tenant.id,
        repo: repo.ok ? repo.repo : undefined,
        method: 'GET',
        status,
        view: hashesView ? 'hashes' : 'full',
      });
    }
  };

  const put: TeamMemoryRoute['handler'] = async (req, res, ctx) => {
    const done = (status: number, extra: Partial<TeamMemoryEvent> = {}) =>
      emit({ tenantId: ctx.tenant.id, repo: repoValue, method: 'PUT', status, ...extra });
    const repo = readRepo(ctx.url);
    const repoValue = repo.ok ? repo.repo : undefined;
    if (!repo.ok) {
      drain(req);
      sendError(res, 400, 'invalid_request_error', repo.message, repo.details);
      return done(400, { errorCode: ERROR_CODES.invalidRepo });
    }
    const raw = await readBody(req, limits.maxRequestBytes);
    if (!raw.ok) {
      // The rest of an oversize body is not read; close the connection instead of draining it.
      res.setHeader('Connection', 'close');
      sendError(
        res,
        413,
        'request_too_large',
        `The request body is over the limit of ${limits.maxRequestBytes} bytes; send fewer entries per PUT.`,
        { error_code: ERROR_CODES.requestTooLarge, max_request_bytes: limits.maxRequestBytes },
      );
      return done(413, { errorCode: ERROR_CODES.requestTooLarge });
    }
    let json: unknown;
    try {
      json = JSON.parse(raw.body.toString('utf8'));
    } catch {
      sendError(
        res,
        400,
        'invalid_request_error',
        'The body is not JSON; send {"entries": {"<key>": "<content>"}}.',
        {
          error_code: ERROR_CODES.invalidBody,
        },
      );
      return done(400, { errorCode: ERROR_CODES.invalidBody });
    }
    const parsed = putBodySchema.safeParse(json);
    if (!parsed.success) {
      sendError(
        res,
        400,
        'invalid_request_error',
        'The body must be {"entries": {"<key>": "<content>"}} with string contents.',
        { error_code: ERROR_CODES.invalidBody },
      );
      return done(400, { errorCode: ERROR_CODES.invalidBody });
    }
    const entries = parsed.data.entries;
    for (const [key, content] of Object.entries(entries)) {
      const invalid = invalidKeyReason(key);
      if (invalid) {
        sendError(res, 400, 'invalid_request_error', `Invalid entry key: ${invalid.reason}.`, {
          error_code: ERROR_CODES.invalidKey,
          key,
          reason: invalid.code,
        });
        return done(400, { errorCode: ERROR_CODES.invalidKey });
      }
      const bytes = Buffer.byteLength(content, 'utf8');
      if (bytes > limits.maxEntryBytes) {
        sendError(
          res,
          413,
          'request_too_large',
          `Entry "${key}" is ${bytes} bytes, over the limit of ${limits.maxEntryBytes} bytes per entry.`,
          {
            error_code: ERROR_CODES.entryTooLarge,
            key,
            max_entry_bytes: limits.maxEntryBytes,
            received_bytes: bytes,
          },
        );
        return done(413, { errorCode: ERROR_CODES.entryTooLarge });
      }
    }
    const ifMatchHeader = req.headers['if-match'];
    const ifMatch = typeof ifMatchHeader === 'string' ? parseEntityTag(ifMatchHeader) : undefined;
    const result = await store.upsert(ctx.tenant.id, repo.repo, entries, {
      ifMatch,
      maxEntries: limits.maxEntries,
      maxRepositories: limits.maxRepositoriesPerTenant,
      maxTenantBytes: limits.maxBytesPerTenant,
    });
    if (!result.ok && result.reason === 'too-many-repositories') {
      sendError(
        res,
        429,
        'rate_limit_error',
        `This PUT would create a repository over the limit of ${result.maxRepositories} team memory repositories per tenant (ENGRAM_TEAM_MEMORY_MAX_REPOS).`,
        { error_code: ERROR_CODES.tooManyRepositories, max_repositories: result.maxRepositories },
      );
      return done(429, { errorCode: ERROR_CODES.tooManyRepositories });
    }
    if (!result.ok && result.reason === 'tenant-bytes-exceeded') {
      sendError(
        res,
        413,
        'request_too_large',
        `This PUT would leave ${result.tenantBytes} bytes of team memory, over the limit of ${result.maxTenantBytes} bytes per tenant (ENGRAM_TEAM_MEMORY_MAX_BYTES).`,
        {
          error_code: ERROR_CODES.tenantBytesExceeded,
          max_tenant_bytes: result.maxTenantBytes,
          tenant_bytes: result.tenantBytes,
        },
      );
      return done(413, { errorCode: ERROR_CODES.tenantBytesExceeded });
    }
    if (!result.ok && result.reason === 'precondition-failed') {
      const headers: Record<string, string> = result.current
        ? { ETag: formatEntityTag(result.current.checksum) }
        : {};
      sendError(
        res,
        412,
        'precondition_failed',
        'The team memory changed since your If-Match checksum; fetch ?view=hashes, recompute and retry.',
        {
          error_code: ERROR_CODES.preconditionFailed,
          ...(result.current ? { current_checksum: result.current.checksum } : {}),
        },
        headers,
      );
      return done(412, { errorCode: ERROR_CODES.preconditionFailed });
    }
    if (!result.ok) {
      const r = result as Extract<typeof result, { reason: 'too-many-entries' }>;
      sendError(
        res,
        413,
        'request_too_large',
        `This PUT would leave ${r.receivedEntries} entries, over the limit of ${r.maxEntries} entries per repository.`,
        {
          error_code: ERROR_CODES.tooManyEntries,
          max_entries: r.maxEntries,
          received_entries: r.receivedEntries,
        },
      );
      return done(413, { errorCode: ERROR_CODES.tooManyEntries });
    }
    sendJson(res, 200, metadata(result.meta), { ETag: formatEntityTag(result.meta.checksum) });
    return done(200, { changedKeys: result.changedKeys.length });
  };

  return [
    { method: 'GET', path: TEAM_MEMORY_PATH, handler: get },
    { method: 'PUT', path: TEAM_MEMORY_PATH, handler: put },
  ];
}

function metadata(meta: RepoMeta) {
  return {
    organizationId: meta.tenantId,
    repo: meta.repo,
    version: meta.version,
    lastModified: meta.lastModified,
    checksum: meta.checksum,
  };
}

type RepoParam =
  | { ok: true; repo: string }
  | { ok: false; message: string; details: Record<string, unknown> };

function readRepo(url: URL): RepoParam {
  const values = url.searchParams.getAll('repo');
  if (values.length !== 1 || !values[0]) {
    return {
      ok: false,
      message: 'Pass exactly one repo query parameter: ?repo=<owner>/<name>.',
      details: { error_code: ERROR_CODES.invalidRepo },
    };
  }
  const parsed = repoSlug.safeParse(values[0]);
  if (!parsed.success) {
    return {
      ok: false,
      message: `repo ${parsed.error.issues[0]?.message ?? 'is invalid'}.`,
      details: { error_code: ERROR_CODES.invalidRepo },
    };
  }
  return { ok: true, repo: parsed.data };
}

function matchesIfNoneMatch(header: string | string[] | undefined, checksum: string): boolean {
  if (typeof header !== 'string' || header.trim() === '') return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((tag) => parseEntityTag(tag) === checksum);
}

async function readBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<{ ok: true; body: Buffer } | { ok: false }> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return { ok: false };
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    total += (chunk as Buffer).length;
    if (total > maxBytes) return { ok: false };
    chunks.push(chunk as Buffer);
  }
  return { ok: true, body: Buffer.concat(chunks) };
}

function drain(req: IncomingMessage): void {
  req.resume();
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text, 'utf8')),
    ...headers,
  });
  res.end(text);
}

export function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  details?: Record<string, unknown>,
  headers: Record<string, string> = {},
): number {
  sendJson(res, status, { error: { type, message, ...(details ? { details } : {}) } }, headers);
  return status;
}
