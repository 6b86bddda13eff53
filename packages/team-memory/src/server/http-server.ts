import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERROR_CODES } from '../contract.js';
import { sendError, type TeamMemoryRoute } from './routes.js';

// A minimal node:http host for route tables like teamMemoryRoutes(): bearer authentication through an
// injected function (the seam to the hosted API's tenants and keys), route lookup, and errors as JSON. The
// hosted API mounts the same routes in its own server; this one serves tests and a standalone deployment.

/** Resolves the tenant an `Authorization` header belongs to, or null when it names none. */
export type Authenticate = (authorizationHeader: string | undefined) => Promise<{ id: string } | null>;

export interface RouteServerOptions {
  routes: readonly TeamMemoryRoute[];
  authenticate: Authenticate;
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
}

export interface RunningRouteServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

export async function startRouteServer(options: RouteServerOptions): Promise<RunningRouteServer> {
  const server = createServer((req, res) => {
    void handle(options, req, res).catch(() => {
      if (!res.headersSent) sendError(res, 500, 'api_error', 'Internal error; try again.');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? '127.0.0.1';
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function handle(options: RouteServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const forPath = options.routes.filter((r) => r.path === url.pathname);
  if (forPath.length === 0) {
    req.resume();
    sendError(res, 404, 'not_found_error', `No route ${url.pathname}.`);
    return;
  }
  const route = forPath.find((r) => r.method === req.method);
  if (!route) {
    req.resume();
    sendError(
      res,
      405,
      'invalid_request_error',
      `Use ${forPath.map((r) => r.method).join(' or ')}.`,
      undefined,
      {
        Allow: forPath.map((r) => r.method).join(', '),
      },
    );
    return;
  }
  const tenant = await options.authenticate(req.headers.authorization);
  if (!tenant) {
    req.resume();
    sendError(
      res,
      401,
      'authentication_error',
      'Missing or unknown API key; send Authorization: Bearer <key>.',
      { error_code: ERROR_CODES.unauthenticated },
      { 'WWW-Authenticate': 'Bearer' },
    );
    return;
  }
  await route.handler(req, res, { tenant: { id: tenant.id }, url });
}
