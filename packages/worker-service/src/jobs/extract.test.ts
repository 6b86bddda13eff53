import { existsSync, promises as fs, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createUserEntry } from '@engram/agent-runtime/transcript/entry';
import { parseMemoryFile } from '@engram/memory-core/memdir/frontmatter';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { postgresSchemaFor } from '@engram/queue/postgres-backend';
import { JobProducer } from '@engram/queue/producer';
import { SessionState } from '@engram/queue/state/session-state';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { comparePrefix } from '@engram/testkit/prefix';
import { errors, reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import type { WorkerService } from '../service.js';
import { WORKER_TEST_BACKENDS, type WorkerTestBackend } from '../testing/backends.test-helpers.js';
import {
  createForeground,
  type ForegroundSession,
  isExtractionRequest,
  lastUserText,
} from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';

const scripted = useModelServer();
const { closer } = scripted;

const PNPM_MEMORY = [
  '---',
  'name: Use pnpm',
  'description: The user wants pnpm, never npm, for installs and scripts in this repo',
  'type: feedback',
  '---',
  'Always use pnpm in this repository.',
  '',
  '**Why:** the user said npm breaks their workspace links.',
  '**How to apply:** run `pnpm install` / `pnpm test`, never npm.',
  '',
].join('\n');

/**
 * A worker service consuming the extract queue on `backend`, in a fresh namespace (on PostgreSQL, a schema the
 * service itself migrates at start, as a deployment's first start does).
 */
async function startService(
  backend: WorkerTestBackend,
  engramHome: string,
  extra: Record<string, string> = {},
): Promise<WorkerService> {
  const namespace = uniquePrefix('extract');
  backend.cleanUpAfter(namespace, closer);
  const service = await startTestWorkerService({
    modelUrl: scripted.server.url,
    engramHome,
    queues: 'extract',
    closer,
    backendEnv: backend.env(),
    namespace,
    env: extra,
  });
  expect(service.engine.config.kind).toBe(backend.kind);
  // On PostgreSQL the namespace is a schema of its own, which the service migrated before consuming.
  expect(service.engine.schema).toBe(backend.kind === 'postgres' ? postgresSchemaFor(namespace) : undefined);
  return service;
}

function producerFor(service: WorkerService) {
  return closer.add(
    new JobProducer(service.engine, {
      config: { extract: { backoff: { type: 'exponential', delayMs: 50, jitter: 0 } } },
    }),
  );
}

async function waitForResults(
  service: WorkerService,
  n: number,
  timeoutMs = 15_000,
): Promise<ExtractResult[]> {
  const queue = producerFor(service).queue('extract');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const done = await queue.getJobs(['completed']);
    if (done.length >= n) {
      return done
        .sort((a, b) => (a.finishedOn ?? 0) - (b.finishedOn ?? 0))
        .map((j) => j.returnvalue as ExtractResult);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  const failed = await queue.getJobs(['failed']);
  throw new Error(
    `timed out waiting for ${n} completed extract jobs; failed: ${failed.map((j) => j.failedReason).join(' | ')}`,
  );
}

/** The extraction fork's script: Read nothing, write the pnpm memory (and optionally try to escape), then stop. */
function extractionScript(fg: ForegroundSession, opts: { escape?: string } = {}) {
  const forkFirst: RecordedRequest[] = [];
  scripted.server.route(
    'extract',
    (r) => isExtractionRequest(r.body),
    (r): ScriptStep => {
      if (lastUserText(r.body).includes('You are now the memory extraction subagent')) {
        forkFirst.push(r);
        const calls = [
          toolUse('Write', { file_path: join(fg.paths.memoryDir, 'feedback_pnpm.md'), content: PNPM_MEMORY }),
        ];
        if (opts.escape) calls.push(toolUse('Write', { file_path: opts.escape, content: 'pwned' }));
        return reply(text('Saving the preference.'), ...calls);
      }
      return textReply('Saved 1 memory.');
    },
  );
  return forkFirst;
}

// Every scenario runs on both queue engines: Redis (production) and BullMQ's PostgreSQL backend (zero-install).
describe.each(WORKER_TEST_BACKENDS)('extract end to end on %s', (_kind, backend) => {
  it('turns a stated preference into a typed memory with an index pointer, from a cache-sharing fork', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [
      textReply('Got it — pnpm from now on.'),
    ]);
    const forkFirst = extractionScript(fg, { escape: join(fg.cwd, 'outside.txt') });
    const leaf = await fg.turn(
      'Please always use pnpm in this repo, never npm: npm breaks our workspace links.',
    );

    const service = await startService(backend, fg.engramHome);
    await producerFor(service).enqueue('extract', fg.extractPayload(leaf));
    const [result] = await waitForResults(service, 1);

    expect(result).toMatchObject({
      outcome: 'extracted',
      memories: [{ path: 'feedback_pnpm.md', type: 'feedback', action: 'created' }],
      deniedToolCalls: 1,
    });
    const memory = parseMemoryFile(
      await fs.readFile(join(fg.paths.memoryDir, 'feedback_pnpm.md'), 'utf8'),
      'x',
    );
    expect(memory).toMatchObject({ name: 'Use pnpm', type: 'feedback' });
    // The worker keeps Claude Code's metadata on what the job wrote: the session that wrote it and when.
    const written = await fs.readFile(join(fg.paths.memoryDir, 'feedback_pnpm.md'), 'utf8');
    expect(written).toContain(`originSessionId: ${fg.extractPayload(leaf).sessionId}`);
    expect(written).toMatch(/modified: "?\d{4}-\d{2}-\d{2}T/);
    const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
    expect(parseIndexEntries(index).map((e) => e.file)).toEqual(['feedback_pnpm.md']);
    // The denied Write outside the memory directory changed nothing on disk.
    expect(existsSync(join(fg.cwd, 'outside.txt'))).toBe(false);

    // The fork's first request repeats the parent's last request and is served from the prompt cache.
    const parentLast = scripted.server.messageRequests('parent').at(-1)!;
    const cmp = comparePrefix(parentLast.body, forkFirst[0]!.body);
    expect(cmp).toMatchObject({ sameModel: true, sameSystem: true, sameTools: true, aIsPrefixOfB: true });
    // The fork adds exactly the parent's final reply and the instruction.
    expect(forkFirst[0]!.body.messages.length).toBe(parentLast.body.messages.length + 2);
    const parentCached =
      (parentLast.response?.usage?.cache_read_input_tokens ?? 0) +
      (parentLast.response?.usage?.cache_creation_input_tokens ?? 0);
    expect(forkFirst[0]!.response?.usage?.cache_read_input_tokens).toBeGreaterThanOrEqual(parentCached);
    expect(result!.usage.cacheReadInputTokens).toBeGreaterThan(0);

    const cursor = await new SessionState(service.engine.state, fg.extractPayload(leaf)).extractCursor();
    expect(cursor).toEqual({ leafUuid: leaf.leafUuid, leafSeq: leaf.leafSeq });
  });

  it('coalesces three turns ended during a running extraction into one trailing run over only the newer messages', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route(
      'parent',
      (r) => !isExtractionRequest(r.body),
      (r) => textReply(`ok ${r.index}`),
      { sticky: true },
    );
    const prompts: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      async (r): Promise<ScriptStep> => {
        const last = lastUserText(r.body);
        if (last.includes('You are now the memory extraction subagent')) {
          prompts.push(last);
          if (prompts.length === 1) await gate;
        }
        return textReply('Nothing worth saving.');
      },
    );
    const service = await startService(backend, fg.engramHome);
    const producer = producerFor(service);
    const first = await fg.turn('first turn with some words');
    await producer.enqueue('extract', fg.extractPayload(first));
    await waitUntil(() => prompts.length === 1, 'first fork running');
    let last = first;
    for (const p of ['second turn words', 'third turn words', 'fourth turn words']) {
      last = await fg.turn(p);
      await producer.enqueue('extract', fg.extractPayload(last));
    }
    release();
    const results = await waitForResults(service, 2);
    await new Promise((r) => setTimeout(r, 300));
    expect(prompts).toHaveLength(2);
    expect(results.map((r) => r.outcome)).toEqual(['extracted', 'extracted']);
    expect(results[1]).toMatchObject({ fromSeq: first.leafSeq, toSeq: last.leafSeq });
    // First run: 2 messages (user, assistant). Trailing run: the 6 messages of the three newer turns only.
    expect(prompts[0]).toContain('most recent ~2 messages');
    expect(prompts[1]).toContain('most recent ~6 messages');
  });

  it('extracts the answered turns and leaves a trailing unanswered prompt for later, cursor before it', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [
      textReply('Got it — pnpm from now on.'),
    ]);
    const forkFirst = extractionScript(fg);
    const answered = await fg.turn(
      'Please always use pnpm in this repo, never npm: npm breaks our workspace links.',
    );
    // The next turn failed after its prompt was recorded: the transcript ends on an unanswered prompt.
    const prompt = createUserEntry(
      { sessionId: fg.sessionId, cwd: fg.cwd, parentUuid: answered.leafUuid },
      'What is the capital of France? Answer in one word.',
    );
    await fg.store.append([prompt]);
    const trailing = { leafUuid: prompt.uuid, leafSeq: answered.leafSeq + 1 };

    const service = await startService(backend, fg.engramHome);
    const producer = producerFor(service);
    await producer.enqueue('extract', fg.extractPayload(trailing));
    const [result] = await waitForResults(service, 1);
    expect(result).toMatchObject({
      outcome: 'extracted',
      toSeq: answered.leafSeq,
      memories: [{ path: 'feedback_pnpm.md', action: 'created' }],
    });
    // The fork never saw the unanswered prompt: its conversation ends on the answered turn's reply.
    expect(JSON.stringify(forkFirst[0]!.body.messages)).not.toContain('capital of France');
    const state = new SessionState(service.engine.state, fg.extractPayload(trailing));
    expect(await state.extractCursor()).toEqual({ leafUuid: answered.leafUuid, leafSeq: answered.leafSeq });

    // Asked again over the same unanswered prompt (a sweep, a retry): nothing to do, the cursor stays.
    await producer.enqueue('extract', {
      ...fg.extractPayload(trailing),
      requestedAt: new Date().toISOString(),
    });
    const results = await waitForResults(service, 2);
    expect(results[1]).toMatchObject({ outcome: 'skipped-incomplete-turn', toSeq: answered.leafSeq });
    expect(await state.extractCursor()).toEqual({ leafUuid: answered.leafUuid, leafSeq: answered.leafSeq });
    expect(forkFirst).toHaveLength(1);
  });

  it('skips the fork and advances the cursor when the agent wrote memory itself since the cursor', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [
      reply(toolUse('Write', { file_path: join(fg.paths.memoryDir, 'user_role.md'), content: PNPM_MEMORY })),
      textReply('Remembered.'),
    ]);
    scripted.server.route('extract', (r) => isExtractionRequest(r.body), [
      textReply('should never be asked'),
    ]);
    await fs.mkdir(fg.paths.memoryDir, { recursive: true });
    const leaf = await fg.turn('remember that I am a Go developer');
    const service = await startService(backend, fg.engramHome);
    await producerFor(service).enqueue('extract', fg.extractPayload(leaf));
    const [result] = await waitForResults(service, 1);
    expect(result?.outcome).toBe('skipped-direct-write');
    expect(scripted.server.messageRequests('extract')).toHaveLength(0);
    const cursor = await new SessionState(service.engine.state, fg.extractPayload(leaf)).extractCursor();
    expect(cursor?.leafSeq).toBe(leaf.leafSeq);
  });

  it('retries model overload (529, 429) with backoff and then succeeds', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Sure.')]);
    const steps: ScriptStep[] = [errors.overloaded(), errors.rateLimited()];
    scripted.server.route(
      'flaky',
      (r) => isExtractionRequest(r.body) && steps.length > 0,
      () => steps.shift()!,
    );
    const forkFirst = extractionScript(fg);
    const leaf = await fg.turn('always use pnpm please, never npm');
    const service = await startService(backend, fg.engramHome);
    const receipt = await producerFor(service).enqueue('extract', fg.extractPayload(leaf));
    const [result] = await waitForResults(service, 1);
    expect(result?.outcome).toBe('extracted');
    const job = await producerFor(service).queue('extract').getJob(receipt.jobId);
    // Two failed attempts (529, then 429), each retried by BullMQ after its backoff, then the successful third.
    expect(job?.attemptsMade).toBe(3);
    expect(scripted.server.messageRequests('flaky').map((r) => r.response?.status)).toEqual([529, 429]);
    expect(forkFirst).toHaveLength(1);
  });

  it('fails a job whose leaf is not in the transcript once, without retrying, with the reason', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Sure.')]);
    const leaf = await fg.turn('hello there friend');
    const service = await startService(backend, fg.engramHome);
    const producer = producerFor(service);
    const receipt = await producer.enqueue(
      'extract',
      fg.extractPayload({ leafUuid: 'not-a-real-uuid', leafSeq: leaf.leafSeq + 5 }),
    );
    await waitUntil(
      async () => (await producer.queue('extract').getJob(receipt.jobId))?.failedReason !== undefined,
      'failure',
    );
    const job = await producer.queue('extract').getJob(receipt.jobId);
    expect(job?.attemptsMade).toBe(1);
    expect(job?.failedReason).toContain('LEAF_NOT_FOUND');
    expect(scripted.server.messageRequests()).toHaveLength(1);
  });

  it('leaves no temp files in the memory directory', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Sure.')]);
    extractionScript(fg);
    const leaf = await fg.turn('always use pnpm please, never npm');
    const service = await startService(backend, fg.engramHome);
    await producerFor(service).enqueue('extract', fg.extractPayload(leaf));
    await waitForResults(service, 1);
    // The memory and its index, plus the record of the pointer titles Engram wrote (memdir/index-file.ts).
    expect(readdirSync(fg.paths.memoryDir).sort()).toEqual([
      '.index-titles.json',
      'MEMORY.md',
      'feedback_pnpm.md',
    ]);
  });
});

async function waitUntil(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}
