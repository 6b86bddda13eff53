import { join } from 'node:path';
import { EngramError, errorCode } from '@engram/errors/engram-error';
import { serializeMemoryFile } from '@engram/memory-core/memdir/frontmatter';
import { loadMemoryIndex } from '@engram/memory-core/memdir/index-file';
import {
  ensureIndexPointer,
  ensureMemoryDir,
  forgetMemory,
  listMemories,
  readMemoryFile,
  validateMemoryRelPath,
  writeMemoryFile,
} from '@engram/memory-core/memdir/memory-files';
import { MEMORY_TYPES } from '@engram/memory-core/memdir/memory-types';
import { type MemoryHeader, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { ENTRYPOINT_NAME } from '@engram/memory-core/paths/memory-paths';
import { isDenied, memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';
import { lexicalRank } from '@engram/memory-core/recall/lexical';
import { scanForSecrets } from '@engram/memory-core/security/secret-scanner';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

// Engram's memory as an MCP server (docs/mcp-and-sdk.md). The server is bound to ONE memory directory chosen
// by whoever composes it (the stdio command from its --cwd, `engram serve` from the authenticated tenant key);
// no tool argument names a directory, so a client cannot reach another project's or tenant's memory.

export const MCP_SERVER_NAME = 'engram';
export const MEMORY_INDEX_URI = 'memory://MEMORY.md';

/** Why a tool call was refused; carried as `code` in the tool error so a client can act on it. */
export class MemoryToolError extends EngramError {}

/**
 * Picks the relevant memories for a query with the recall selector (a recall job when workers run). Returns
 * relative filenames; throwing (or being absent) falls back to the lexical BM25 ranking from memory-core.
 */
export type RecallSelector = (query: string, headers: readonly MemoryHeader[]) => Promise<string[]>;

export interface MemoryServerOptions {
  memoryDir: string;
  selector?: RecallSelector;
  /** Session the saves are attributed to (`metadata.originSessionId`). */
  sessionId?: string;
  /** Called after each successful save or forget, e.g. to enqueue consolidation. */
  onChange?: (change: { kind: 'save' | 'forget'; file: string }) => void | Promise<void>;
}

const fileArg = z
  .string()
  .min(1)
  .max(512)
  .describe('Memory file relative to the memory directory, e.g. "topic.md"');

function ok(value: unknown): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(value, null, 2) }],
    structuredContent: value as Record<string, unknown>,
  };
}

/** Every refusal becomes an MCP tool error (`isError`) with the typed reason, never a protocol failure. */
function toolError(error: unknown): CallToolResult {
  const code = errorCode(error) ?? 'INTERNAL';
  const retryable = error instanceof EngramError ? error.retryable : false;
  const message = error instanceof Error ? error.message : String(error);
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify({ code, retryable, message }) }],
  };
}

async function guarded(run: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    return ok(await run());
  } catch (error) {
    return toolError(error);
  }
}

/** Search: the injected selector first, memory-core's lexical ranking when it is absent or fails. */
export async function searchMemories(
  opts: Pick<MemoryServerOptions, 'memoryDir' | 'selector'>,
  query: string,
  limit: number,
): Promise<{
  via: 'selector' | 'lexical';
  memories: { file: string; name?: string; description: string | null }[];
}> {
  const { headers } = await scanMemoryDir(opts.memoryDir);
  const describe = (h: MemoryHeader) => ({
    file: h.filename,
    ...(h.name !== undefined ? { name: h.name } : {}),
    description: h.description,
  });
  if (opts.selector) {
    try {
      const picked = new Set(await opts.selector(query, headers));
      return {
        via: 'selector',
        memories: headers
          .filter((h) => picked.has(h.filename))
          .slice(0, limit)
          .map(describe),
      };
    } catch {
      // the selector is best-effort; the lexical ranking below always answers
    }
  }
  return { via: 'lexical', memories: lexicalRank(query, headers, { limit }).map((m) => describe(m.header)) };
}

/**
 * Save: the file is built like Engram's own writes, then the fork write policy decides (path, shape, links,
 * size); content that looks like a secret is refused anywhere (an MCP client is an outside agent); the write
 * is atomic and the index pointer is maintained the way jobs maintain it after a fork's write.
 */
export async function saveMemory(
  opts: Pick<MemoryServerOptions, 'memoryDir' | 'sessionId'>,
  input: {
    file: string;
    name: string;
    description: string;
    type: (typeof MEMORY_TYPES)[number];
    body: string;
  },
): Promise<{ file: string; created: boolean; indexUpdated: boolean }> {
  const rel = validateMemoryRelPath(input.file);
  const fields = { name: input.name, description: input.description, type: input.type };
  const text = serializeMemoryFile(fields, input.body);
  const found = scanForSecrets(text);
  if (found.length > 0) {
    throw new MemoryToolError(
      'SECRET_IN_MEMORY',
      `The memory contains what looks like a secret (${found.map((f) => f.label).join(', ')}); memories are ` +
        'read back into prompts and may be shared. Describe where the secret lives instead.',
      { retryable: false },
    );
  }
  await ensureMemoryDir(opts.memoryDir);
  const decision = await memoryWritePolicy(opts.memoryDir)(
    { name: 'Write' },
    { file_path: join(opts.memoryDir, rel), content: text },
  );
  if (isDenied(decision)) {
    throw new MemoryToolError(
      `WRITE_DENIED_${(decision.reason ?? 'policy').toUpperCase()}`,
      decision.message,
      { retryable: false },
    );
  }
  const written = await writeMemoryFile(opts.memoryDir, rel, fields, input.body, {
    ...(opts.sessionId ? { originSessionId: opts.sessionId } : {}),
  });
  const pointer = await ensureIndexPointer(opts.memoryDir, rel);
  return {
    file: rel,
    created: written.created,
    indexUpdated: pointer.added || pointer.titleUpdated === true,
  };
}

/** The index as it is on disk (memory-core's bounded loader: FIFO-safe, capped); empty when there is none. */
async function readIndex(memoryDir: string): Promise<string> {
  return (await loadMemoryIndex(join(memoryDir, ENTRYPOINT_NAME))).raw;
}

/** A new MCP server over one memory directory: tools search/list/read/save/forget and the MEMORY.md resource. */
export function createMemoryServer(opts: MemoryServerOptions): McpServer {
  const server = new McpServer({ name: MCP_SERVER_NAME, version: '0.1.0' });
  const { memoryDir } = opts;

  server.registerTool(
    'search_memories',
    {
      description: 'Find the memories relevant to a question or task (recall selector, lexical fallback).',
      inputSchema: { query: z.string().min(1).max(4000), limit: z.number().int().min(1).max(20).default(5) },
    },
    ({ query, limit }) => guarded(() => searchMemories(opts, query, limit)),
  );
  server.registerTool(
    'list_memories',
    { description: 'List every memory file with its type, name, description and age, newest first.' },
    () =>
      guarded(async () => {
        const { memories, problems } = await listMemories(memoryDir);
        return {
          memories: memories.map(({ path: _path, ...m }) => m),
          problems: problems.map((p) => ({ file: p.filename, code: p.code })),
        };
      }),
  );
  server.registerTool(
    'read_memory',
    { description: 'Read one memory file (frontmatter fields and body).', inputSchema: { file: fileArg } },
    ({ file }) =>
      guarded(async () => {
        const m = await readMemoryFile(memoryDir, file);
        return {
          file: validateMemoryRelPath(file),
          name: m.name,
          description: m.description,
          type: m.type,
          body: m.body,
        };
      }),
  );
  server.registerTool(
    'save_memory',
    {
      description:
        'Save (create or replace) one memory file and its MEMORY.md pointer. Refused for secrets and for paths outside the memory directory.',
      inputSchema: {
        file: fileArg,
        name: z.string().min(1).max(200),
        description: z.string().min(1).max(300),
        type: z.enum(MEMORY_TYPES),
        body: z.string().max(200_000),
      },
    },
    (input) =>
      guarded(async () => {
        const saved = await saveMemory(opts, input);
        await opts.onChange?.({ kind: 'save', file: saved.file });
        return saved;
      }),
  );
  server.registerTool(
    'forget_memory',
    { description: 'Delete one memory file and its MEMORY.md line.', inputSchema: { file: fileArg } },
    ({ file }) =>
      guarded(async () => {
        const result = await forgetMemory(memoryDir, file);
        await opts.onChange?.({ kind: 'forget', file: validateMemoryRelPath(file) });
        return result;
      }),
  );
  server.registerResource(
    'memory-index',
    MEMORY_INDEX_URI,
    {
      title: 'MEMORY.md',
      description: 'The memory index loaded into every session',
      mimeType: 'text/markdown',
    },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'text/markdown', text: await readIndex(memoryDir) }],
    }),
  );
  return server;
}
