import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { StopReason } from '@anthropic-ai/sdk/resources/messages';
import { validateJsonSchema } from './json-schema.js';
import {
  type CacheBlock,
  estimateTokens,
  type MessagesRequestBody,
  prefixHashes,
  requestBlocks,
} from './prefix.js';
import type { ScriptedBlock, ScriptedError, ScriptedReply, ScriptStep } from './replies.js';

// A local Anthropic-compatible Messages API for tests and the demo. The real `@anthropic-ai/sdk` talks to it
// over HTTP (ANTHROPIC_BASE_URL). Replies come from per-test scripts; usage figures, including prompt-cache
// reads and writes, are computed from the requests actually received so cache sharing can be measured.

export interface RecordedRequest {
  /** 0-based arrival order across all endpoints. */
  index: number;
  path: string;
  body: MessagesRequestBody;
  headers: Record<string, string | string[] | undefined>;
  stream: boolean;
  receivedAt: number;
  /** Name of the route that answered, or 'default' / 'responder' / 'unscripted'. */
  route?: string;
  response?: { status: number; usage?: ResponseUsage; stopReason?: StopReason; content?: ScriptedBlock[] };
}

export interface ResponseUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

export type Responder = (request: RecordedRequest) => ScriptStep | Promise<ScriptStep>;

interface Route {
  name: string;
  match: (request: RecordedRequest) => boolean;
  steps: ScriptStep[];
  responder?: Responder;
  /** Keep answering with the last step once the queue is empty. */
  sticky: boolean;
}

export interface ModelServerOptions {
  port?: number;
  /** Requests whose estimated size exceeds this are answered with a real-looking "prompt is too long". */
  contextWindow?: number;
  /** Latency added to every reply, on top of a step's own. */
  latencyMs?: number;
  /** Answer for requests no script or route claims. Default: a 400 naming the unscripted request. */
  fallback?: Responder;
  /** Characters per SSE text delta. */
  streamChunkSize?: number;
  /** Keep only the last N requests in `requests` (a long-running playground server); default: all. */
  maxRecorded?: number;
}

export interface SchemaViolationRecord {
  requestIndex: number;
  problems: string[];
}

export class ModelServer {
  readonly requests: RecordedRequest[] = [];
  /** Requests that no script, route or fallback answered: a test that sees any has a scripting bug. */
  readonly unscripted: RecordedRequest[] = [];
  readonly schemaViolations: SchemaViolationRecord[] = [];
  private readonly queue: ScriptStep[] = [];
  private routes: Route[] = [];
  private responder: Responder | undefined;
  private readonly cache = new Map<string, number>();
  private counter = 0;
  private latencyMs: number;
  private contextWindow: number | undefined;

  constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly options: ModelServerOptions,
  ) {
    this.latencyMs = options.latencyMs ?? 0;
    this.contextWindow = options.contextWindow;
    this.responder = options.fallback;
  }

  /** Queue replies for requests that no route claims, answered in order. */
  script(...steps: ScriptStep[]): this {
    this.queue.push(...steps);
    return this;
  }

  /** Requests matching `match` are answered from this route's own queue (or responder) before the default. */
  route(
    name: string,
    match: (request: RecordedRequest) => boolean,
    stepsOrResponder: ScriptStep[] | Responder,
    options: { sticky?: boolean } = {},
  ): this {
    const route: Route = {
      name,
      match,
      steps: Array.isArray(stepsOrResponder) ? [...stepsOrResponder] : [],
      sticky: options.sticky ?? false,
    };
    if (!Array.isArray(stepsOrResponder)) route.responder = stepsOrResponder;
    this.routes.push(route);
    return this;
  }

  /** Add more steps to an existing route. */
  extendRoute(name: string, ...steps: ScriptStep[]): this {
    const route = this.routes.find((r) => r.name === name);
    if (!route) throw new Error(`testkit: no route named ${name}`);
    route.steps.push(...steps);
    return this;
  }

  /** Answer everything unclaimed with a function of the request. */
  respond(responder: Responder | undefined): this {
    this.responder = responder;
    return this;
  }

  setLatency(ms: number): this {
    this.latencyMs = ms;
    return this;
  }

  setContextWindow(tokens: number | undefined): this {
    this.contextWindow = tokens;
    return this;
  }

  /** Pending steps not yet consumed (default queue plus every route). */
  pendingSteps(): number {
    return this.queue.length + this.routes.reduce((n, r) => n + (r.sticky ? 0 : r.steps.length), 0);
  }

  /** Recorded `/v1/messages` requests, optionally only those a route answered. */
  messageRequests(route?: string): RecordedRequest[] {
    return this.requests.filter(
      (r) => r.path === '/v1/messages' && (route === undefined || r.route === route),
    );
  }

  /** Forget scripts, routes, recordings and the prompt cache. */
  reset(): void {
    this.requests.length = 0;
    this.unscripted.length = 0;
    this.schemaViolations.length = 0;
    this.queue.length = 0;
    this.routes = [];
    this.responder = this.options.fallback;
    this.cache.clear();
    this.latencyMs = this.options.latencyMs ?? 0;
    this.contextWindow = this.options.contextWindow;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }

  /** @internal */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, {
        data: [
          { type: 'model', id: 'testkit-model', display_name: 'Testkit scripted model', created_at: '' },
        ],
        has_more: false,
        first_id: 'testkit-model',
        last_id: 'testkit-model',
      });
    }
    if (req.method !== 'POST' || (path !== '/v1/messages' && path !== '/v1/messages/count_tokens')) {
      return sendError(res, 404, 'not_found_error', `testkit: no endpoint ${req.method} ${path}`);
    }
    let body: MessagesRequestBody;
    try {
      body = JSON.parse(await readBody(req)) as MessagesRequestBody;
    } catch {
      return sendError(res, 400, 'invalid_request_error', 'testkit: request body is not JSON');
    }
    const shapeProblem = checkShape(body, path);
    if (shapeProblem) return sendError(res, 400, 'invalid_request_error', shapeProblem);

    const recorded: RecordedRequest = {
      index: this.counter++,
      path,
      body,
      headers: { ...req.headers },
      stream: body.stream === true,
      receivedAt: Date.now(),
    };
    this.requests.push(recorded);
    if (this.options.maxRecorded !== undefined && this.requests.length > this.options.maxRecorded)
      this.requests.splice(0, this.requests.length - this.options.maxRecorded);

    const blocks = requestBlocks(body);
    const totalTokens = blocks.reduce((n, b) => n + b.tokens, 0);
    if (path === '/v1/messages/count_tokens') {
      recorded.response = { status: 200 };
      return sendJson(res, 200, { input_tokens: totalTokens });
    }

    if (this.contextWindow !== undefined && totalTokens > this.contextWindow) {
      recorded.route = 'context-window';
      recorded.response = { status: 400 };
      return sendError(
        res,
        400,
        'invalid_request_error',
        `prompt is too long: ${totalTokens} tokens > ${this.contextWindow} maximum`,
      );
    }

    const step = await this.nextStep(recorded);
    if (!step) {
      recorded.route = 'unscripted';
      this.unscripted.push(recorded);
      recorded.response = { status: 400 };
      return sendError(
        res,
        400,
        'invalid_request_error',
        `testkit: no scripted reply for request #${recorded.index} (${describeRequest(body)})`,
      );
    }

    const latency = this.latencyMs + (step.latencyMs ?? 0);
    if (latency > 0) await sleep(latency);
    if (res.destroyed) return;

    if (step.kind === 'error' && !(step.midStream && recorded.stream)) {
      recorded.response = { status: step.status };
      return sendScriptedError(res, step);
    }

    const replyStep: ScriptedReply =
      step.kind === 'error' ? { content: [{ type: 'text', text: '' }] } : (step as ScriptedReply);
    const content = replyStep.content.map(materialize);
    const stopReason: StopReason =
      replyStep.stopReason ?? (content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn');

    const format = body.output_config?.format;
    if (format?.type === 'json_schema' && !replyStep.skipSchemaValidation && step.kind !== 'error') {
      const problems = checkStructuredOutput(content, format.schema);
      if (problems.length) {
        this.schemaViolations.push({ requestIndex: recorded.index, problems });
        recorded.response = { status: 400 };
        return sendError(
          res,
          400,
          'invalid_request_error',
          `testkit: scripted reply violates output_config.format: ${problems.join('; ')}`,
        );
      }
    }

    const usage = { ...this.cacheUsage(body.model, blocks), output_tokens: outputTokens(content) };
    Object.assign(usage, replyStep.usage ?? {});
    recorded.response = { status: 200, usage, stopReason, content };
    const message = {
      id: `msg_testkit_${recorded.index}_${randomBytes(4).toString('hex')}`,
      type: 'message',
      role: 'assistant',
      model: replyStep.model ?? body.model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: fullUsage(usage),
    };
    if (!recorded.stream) return sendJson(res, 200, message);
    await this.stream(
      res,
      message,
      step.kind === 'error' ? step : undefined,
      step.kind === 'error' ? undefined : step.pauseStream,
    );
  }

  private async nextStep(recorded: RecordedRequest): Promise<ScriptStep | undefined> {
    for (const route of this.routes) {
      if (!route.match(recorded)) continue;
      recorded.route = route.name;
      if (route.responder) return route.responder(recorded);
      if (route.steps.length > 1 || (route.steps.length === 1 && !route.sticky)) return route.steps.shift();
      if (route.steps.length === 1) return route.steps[0];
      return undefined;
    }
    if (this.queue.length) {
      recorded.route = 'default';
      return this.queue.shift();
    }
    if (this.responder) {
      recorded.route = 'responder';
      return this.responder(recorded);
    }
    return undefined;
  }

  /**
   * Prompt-cache accounting. Every breakpoint (a block carrying cache_control) writes the prefix ending there;
   * a request reads the longest previously written prefix it starts with; tokens from there up to its last
   * breakpoint are cache writes; the rest is plain input. Requests without breakpoints neither read nor write,
   * as with the real API. (Simplifications: no TTL, no minimum cacheable length, no 20-block lookback.)
   */
  private cacheUsage(model: string, blocks: CacheBlock[]): Omit<ResponseUsage, 'output_tokens'> {
    const hashes = prefixHashes(model, blocks);
    const cumulative: number[] = [];
    blocks.reduce((n, b, i) => {
      cumulative[i] = n + b.tokens;
      return cumulative[i]!;
    }, 0);
    const total = cumulative[cumulative.length - 1] ?? 0;
    const lastBreakpoint = blocks.map((b) => b.breakpoint).lastIndexOf(true);
    if (lastBreakpoint < 0) {
      return { input_tokens: total, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
    }
    let readUpTo = -1;
    for (let i = lastBreakpoint; i >= 0; i--) {
      if (this.cache.has(hashes[i]!)) {
        readUpTo = i;
        break;
      }
    }
    const read = readUpTo >= 0 ? cumulative[readUpTo]! : 0;
    const created = cumulative[lastBreakpoint]! - read;
    blocks.forEach((b, i) => {
      if (b.breakpoint) this.cache.set(hashes[i]!, cumulative[i]!);
    });
    return {
      input_tokens: total - read - created,
      cache_read_input_tokens: read,
      cache_creation_input_tokens: created,
    };
  }

  private async stream(
    res: ServerResponse,
    message: Record<string, unknown>,
    midStreamError?: ScriptedError,
    pause?: ScriptedReply['pauseStream'],
  ) {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'request-id': `req_testkit_${randomBytes(6).toString('hex')}`,
    });
    const usage = message.usage as ResponseUsage & Record<string, unknown>;
    const send = (event: string, data: unknown) => {
      if (!res.destroyed) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    send('message_start', {
      type: 'message_start',
      message: {
        ...message,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    });
    send('ping', { type: 'ping' });
    if (midStreamError) {
      send('error', { type: 'error', error: { type: midStreamError.type, message: midStreamError.message } });
      res.end();
      return;
    }
    const chunk = this.options.streamChunkSize ?? 24;
    let textDeltas = 0;
    for (const [index, block] of (message.content as ScriptedBlock[]).entries()) {
      if (block.type === 'text') {
        send('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { type: 'text', text: '' },
        });
        for (const piece of chunks(block.text, chunk)) {
          send('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'text_delta', text: piece },
          });
          if (pause && ++textDeltas === pause.afterTextDeltas) await pause.until.catch(() => undefined);
        }
      } else if (block.type === 'tool_use') {
        send('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        });
        for (const piece of chunks(JSON.stringify(block.input), chunk)) {
          send('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'input_json_delta', partial_json: piece },
          });
        }
      } else {
        send('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { type: 'thinking', thinking: '', signature: '' },
        });
        for (const piece of chunks(block.thinking, chunk)) {
          send('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'thinking_delta', thinking: piece },
          });
        }
        send('content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: { type: 'signature_delta', signature: block.signature ?? 'testkit-signature' },
        });
      }
      send('content_block_stop', { type: 'content_block_stop', index });
    }
    send('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: message.stop_reason, stop_sequence: null, stop_details: null },
      usage: {
        output_tokens: usage.output_tokens,
        input_tokens: usage.input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
      },
    });
    send('message_stop', { type: 'message_stop' });
    res.end();
  }
}

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  let model: ModelServer | undefined;
  const server = createServer((req, res) => {
    model!.handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) {
        sendError(
          res,
          500,
          'api_error',
          `testkit: ${error instanceof Error ? error.message : String(error)}`,
        );
      } else res.end();
    });
  });
  // Longer than any client's idle-socket timeout (undici's is 4 s): the client always closes an idle keep-alive
  // socket first. With the server closing first (it was 1 s), a request sent on a socket the server was closing
  // at that instant failed with ECONNRESET — and tests' clients make no retries (seen in CI, under load).
  // close() ends every connection at once, so a long timeout never holds a test open.
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  model = new ModelServer(server, `http://127.0.0.1:${port}`, options);
  return model;
}

function materialize(block: ScriptedBlock): ScriptedBlock {
  if (block.type === 'tool_use' && !block.id)
    return { ...block, id: `toolu_${randomBytes(12).toString('hex')}` };
  return block;
}

function outputTokens(content: ScriptedBlock[]): number {
  return Math.max(1, estimateTokens(JSON.stringify(content)));
}

function fullUsage(usage: ResponseUsage) {
  return {
    ...usage,
    cache_creation: {
      ephemeral_5m_input_tokens: usage.cache_creation_input_tokens,
      ephemeral_1h_input_tokens: 0,
    },
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: 'standard',
    speed: null,
  };
}

function checkStructuredOutput(content: ScriptedBlock[], schema: unknown): string[] {
  const first = content.find((b): b is Extract<ScriptedBlock, { type: 'text' }> => b.type === 'text');
  if (!first) return ['reply has no text block to carry the JSON output'];
  let parsed: unknown;
  try {
    parsed = JSON.parse(first.text);
  } catch {
    return ['first text block is not JSON'];
  }
  return validateJsonSchema(parsed, schema).map((v) => `${v.path} ${v.message}`);
}

function checkShape(body: MessagesRequestBody, path: string): string | undefined {
  if (!body || typeof body !== 'object') return 'body must be an object';
  if (typeof body.model !== 'string' || !body.model) return 'model: Field required';
  if (!Array.isArray(body.messages)) return 'messages: Field required';
  if (path === '/v1/messages' && typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
  for (const [i, m] of body.messages.entries()) {
    // Claude Code 2.1.x sends hook context and recalled memories as `role: "system"` messages.
    if (m.role !== 'user' && m.role !== 'assistant' && m.role !== 'system')
      return `messages.${i}.role: must be user, assistant or system`;
    if (typeof m.content !== 'string' && !Array.isArray(m.content)) return `messages.${i}.content: invalid`;
  }
  return undefined;
}

function describeRequest(body: MessagesRequestBody): string {
  const last = body.messages[body.messages.length - 1];
  const text =
    last === undefined
      ? ''
      : typeof last.content === 'string'
        ? last.content
        : last.content.map((b) => (typeof b.text === 'string' ? b.text : `[${String(b.type)}]`)).join(' ');
  return `${body.messages.length} messages, last: ${JSON.stringify(text.slice(0, 120))}`;
}

function chunks(value: string, size: number): string[] {
  if (value.length === 0) return [''];
  const out: string[] = [];
  for (let i = 0; i < value.length; i += size) out.push(value.slice(i, i + size));
  return out;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  if (res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'application/json',
    'request-id': `req_testkit_${randomBytes(6).toString('hex')}`,
    ...headers,
  });
  res.end(JSON.stringify(body));
}

function sendError(res: ServerResponse, status: number, type: string, message: string) {
  sendJson(res, status, { type: 'error', error: { type, message } });
}

function sendScriptedError(res: ServerResponse, step: ScriptedError) {
  const headers: Record<string, string> = { ...(step.headers ?? {}) };
  if (step.retryAfterMs !== undefined) {
    headers['retry-after-ms'] = String(step.retryAfterMs);
    headers['retry-after'] = String(Math.max(1, Math.ceil(step.retryAfterMs / 1000)));
  }
  sendJson(res, step.status, { type: 'error', error: { type: step.type, message: step.message } }, headers);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
