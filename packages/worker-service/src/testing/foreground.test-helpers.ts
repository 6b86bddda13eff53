import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cacheSafeParamsPathFor, saveCacheSafeParams } from '@engram/agent-runtime/fork/cache-safe-params';
import { runQueryLoop } from '@engram/agent-runtime/loop/query-loop';
import { createModelClient, type ModelClient } from '@engram/agent-runtime/model/client';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { defaultTools, toolDefinitions } from '@engram/agent-runtime/tools/registry';
import { allowAll } from '@engram/agent-runtime/tools/tool';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import { type ChainEntry, createUserEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { type EngramPaths, engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { ExtractPayload } from '@engram/queue/jobs/extract';
import type { ModelServer, RecordedRequest } from '@engram/testkit/model-server';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';

// Plays the foreground agent for worker tests: runs real turns through the runtime's query loop against the
// scripted model server, appends them to the session transcript, and saves the cache-safe parameters — the
// exact state a worker finds on the shared volume.

export const PARENT_MODEL = 'claude-sonnet-5-5';
export const PARENT_SYSTEM = [
  { type: 'text' as const, text: 'You are a coding agent. Be brief.\n\n# auto memory\n…' },
];
export const USER_CONTEXT =
  '# claudeMd\nContents of CLAUDE.md:\nUse tabs.\n\n# currentDate\nToday is 2026-11-30.';

export interface ForegroundSession {
  engramHome: string;
  cwd: string;
  sessionId: string;
  paths: EngramPaths;
  store: TranscriptStore;
  client: ModelClient;
  /** Runs one user turn; returns the leaf (last entry) and its 1-based line number. */
  turn(prompt: string): Promise<{ leafUuid: string; leafSeq: number; newEntries: ChainEntry[] }>;
  extractPayload(leaf: { leafUuid: string; leafSeq: number }): ExtractPayload;
}

export function createForeground(
  server: ModelServer,
  opts: { engramHome?: string; sessionId?: string; cwd?: string } = {},
): ForegroundSession {
  const engramHome = opts.engramHome ?? mkdtempSync(join(tmpdir(), 'engram-home-'));
  // Sessions given the same cwd share a project (and its memory directory).
  const cwd = opts.cwd ?? mkdtempSync(join(tmpdir(), 'engram-project-'));
  mkdirSync(cwd, { recursive: true });
  const sessionId = opts.sessionId ?? `s${Math.random().toString(36).slice(2, 10)}`;
  const paths = engramPathsFor({ engramHome, cwd, projectRoot: cwd });
  const store = new TranscriptStore(paths.transcriptPath(sessionId));
  const client = createModelClient({ apiKey: 'test', baseURL: server.url, maxRetries: 0 });
  const tools = defaultTools();
  const session: ForegroundSession = {
    engramHome,
    cwd,
    sessionId,
    paths,
    store,
    client,
    async turn(prompt) {
      const { entries } = await store.readAll();
      const chain = entries.length ? buildChain(entries).live : [];
      const user = createUserEntry({ sessionId, cwd, parentUuid: chain.at(-1)?.uuid ?? null }, prompt);
      await store.append([user]);
      const result = await runQueryLoop({
        client,
        model: PARENT_MODEL,
        system: PARENT_SYSTEM,
        tools,
        maxTokens: 8192,
        messages: [...chain, user],
        userContext: USER_CONTEXT,
        canUseTool: allowAll,
        cwd,
        sessionId,
        boundary: ATTENDED,
        toolResultsDir: paths.toolResultsDir(sessionId),
        onMessage: async (entry) => {
          await store.append([entry]);
        },
      });
      await saveCacheSafeParams(cacheSafeParamsPathFor(paths.transcriptPath(sessionId)), {
        model: PARENT_MODEL,
        system: PARENT_SYSTEM,
        tools: toolDefinitions(tools),
        userContext: USER_CONTEXT,
        maxTokens: 8192,
      });
      const after = await store.readAll();
      const leaf = after.entries.at(-1)!;
      return {
        leafUuid: leaf.uuid!,
        leafSeq: after.entries.length,
        newEntries: [user, ...result.newMessages],
      };
    },
    extractPayload(leaf) {
      return {
        sessionId,
        projectDir: sanitizePath(cwd),
        transcriptDir: sanitizePath(cwd),
        leafUuid: leaf.leafUuid,
        leafSeq: leaf.leafSeq,
        requestedAt: new Date().toISOString(),
      };
    },
  };
  return session;
}

const EXTRACTION_INSTRUCTION = 'You are now the memory extraction subagent';

/** True for every request of an extraction fork (its conversation holds the extraction instruction). */
export function isExtractionRequest(body: { messages: Array<{ role: string; content: unknown }> }): boolean {
  return JSON.stringify(body.messages).includes(EXTRACTION_INSTRUCTION);
}

/**
 * Scripts every extraction fork on `server` (the route `extract`): the fork's first turn Writes the memory
 * `save` returns into the memory directory its instruction names (the live one, or a staged copy), after
 * `latencyMs`, or saves nothing when `save` returns undefined; its next turn is answered by `after` (default
 * "Saved."). `save` sees the request, so a test can count runs or pick the file by what the conversation says.
 */
export function scriptExtractionFork(
  server: ModelServer,
  save: (memoryDir: string, request: RecordedRequest) => { file: string; content: string } | undefined,
  options: { after?: (request: RecordedRequest) => ScriptStep; latencyMs?: number } = {},
): void {
  server.route(
    'extract',
    (r) => isExtractionRequest(r.body),
    (r): ScriptStep => {
      const instruction = lastUserText(r.body);
      if (!instruction.includes(EXTRACTION_INSTRUCTION)) return options.after?.(r) ?? textReply('Saved.');
      const memoryDir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
      if (!memoryDir) throw new Error('no memory directory in the extraction instruction');
      const memory = save(memoryDir, r);
      if (!memory) return textReply('Nothing new to save.');
      const write = reply(
        text('Saving.'),
        toolUse('Write', { file_path: join(memoryDir, memory.file), content: memory.content }),
      );
      return options.latencyMs === undefined ? write : { ...write, latencyMs: options.latencyMs };
    },
    { sticky: true },
  );
}

export function lastUserText(body: { messages: Array<{ role: string; content: unknown }> }): string {
  const last = body.messages.at(-1);
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return (last.content as Array<{ type: string; text?: string }>).map((b) => b.text ?? '').join('\n');
}
