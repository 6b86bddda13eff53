import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { hashContent } from '@engram/memory-work/tree-hash';
import { openQueueEngine } from '@engram/queue/engine';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { JobProducer } from '@engram/queue/producer';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';
import { WORKER_TEST_BACKENDS } from '../testing/backends.test-helpers.js';
import { createForeground, isExtractionRequest, lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';

// Staged extraction (ENGRAM_EXTRACT_STAGED): N sessions of one repository extract at once. Each fork writes a
// file of its own and appends its fact to one shared file it reads first (a model that reads before it
// writes, and writes what its Read returned), on the directory its instruction names — the live memory
// directory in both runs; a staged fork's tools map it onto its private copy. The staged forks run in
// parallel; the shared file's commits conflict and re-fork on a fresh view; the result is the serial run's:
// the same memories, every fact once, one pointer per file.

const scripted = useModelServer();
const { closer } = scripted;

const N = 4;
const MARK = 'You are now the memory extraction subagent';

interface Outcome {
  maxRunning: number;
  forks: number;
  results: ExtractResult[];
  /** File → its body's lines (sorted; the frontmatter's metadata differs by run). */
  files: Record<string, string[]>;
  pointers: string[];
}

type Message = { role: string; content: unknown };
type Block = {
  type: string;
  id?: string;
  name?: string;
  input?: { file_path?: string };
  tool_use_id?: string;
};

/** What the fork's Read of `path` returned (the file's text without cat -n numbering), if it succeeded. */
function readResult(messages: Message[], path: string): string | undefined {
  const blocks = messages.flatMap((m) => (Array.isArray(m.content) ? (m.content as Block[]) : []));
  const use = blocks.findLast(
    (b) => b.type === 'tool_use' && b.name === 'Read' && b.input?.file_path === path,
  );
  const result = blocks.find((b) => b.type === 'tool_result' && b.tool_use_id === use?.id) as
    | (Block & { content: unknown; is_error?: boolean })
    | undefined;
  if (!result || result.is_error) return undefined;
  const text =
    typeof result.content === 'string'
      ? result.content
      : (result.content as Array<{ text?: string }>).map((b) => b.text ?? '').join('');
  return text
    .split('\n')
    .map((line) => `${line.replace(/^\s*\d+\t/, '')}\n`)
    .join('');
}

function body(text: string): string[] {
  const end = text.indexOf('\n---\n', 4);
  return text
    .slice(end + 5)
    .split('\n')
    .filter(Boolean)
    .sort();
}

async function runProject(
  mode: 'serial' | 'staged' | 'auto',
  backend: (typeof WORKER_TEST_BACKENDS)[number][1],
): Promise<Outcome> {
  const engramHome = mkdtempSync(join(tmpdir(), 'engram-staged-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'engram-staged-repo-'));
  scripted.server.reset();
  scripted.server.route(
    'parent',
    (r) => !isExtractionRequest(r.body),
    (r) => textReply(`ok ${r.index}`),
    {
      sticky: true,
    },
  );
  let running = 0;
  let maxRunning = 0;
  let forks = 0;
  const phase = new Map<number, number>();
  const dirOf = new Map<number, string>();
  let release!: () => void;
  const allStarted = new Promise<void>((r) => {
    release = r;
  });
  // The first round waits until every fork has started (or 4 s): in the staged run they overlap.
  const gate = Promise.race([allStarted, new Promise((r) => setTimeout(r, 4_000))]);
  scripted.server.route(
    'extract',
    (r) => isExtractionRequest(r.body),
    async (r): Promise<ScriptStep> => {
      const last = lastUserText(r.body);
      const session = Number(/session (\d+) says/.exec(JSON.stringify(r.body.messages))?.[1]);
      if (last.includes(MARK)) {
        forks++;
        running++;
        maxRunning = Math.max(maxRunning, running);
        if (running >= N) release();
        await gate;
        const memoryDir = /the memory directory `([^`]+)`/.exec(last)![1]!;
        dirOf.set(session, memoryDir);
        phase.set(session, 1);
        const sharedPath = join(memoryDir, 'project_shared.md');
        // Turn 1: read the shared file (the Write tool refuses to overwrite a file it has not read; a fork
        // whose view lacks it is told so) and save this session's own fact.
        return reply(
          text('Saving.'),
          toolUse('Read', { file_path: sharedPath }),
          toolUse('Write', {
            file_path: join(memoryDir, `project_s${session}.md`),
            content: `---\nname: S${session}\ndescription: session ${session}\ntype: project\n---\nS${session}\n`,
          }),
        );
      }
      if (phase.get(session) === 1) {
        // Turn 2: append to what the Read returned (the fork's view: its copy, in the staged run).
        phase.set(session, 2);
        const sharedPath = join(dirOf.get(session)!, 'project_shared.md');
        const current =
          readResult(r.body.messages, sharedPath) ??
          '---\nname: Shared\ndescription: facts of every session\ntype: project\n---\n';
        return reply(
          toolUse('Write', { file_path: sharedPath, content: `${current}fact of session ${session}\n` }),
        );
      }
      running--;
      return textReply('Saved.');
    },
    { sticky: true },
  );
  const sessions = [];
  for (let i = 0; i < N; i++) {
    const fg = createForeground(scripted.server, { engramHome, cwd });
    sessions.push({ fg, leaf: await fg.turn(`session ${i} says: remember fact ${i}`) });
  }
  const ns = uniquePrefix(mode);
  backend.cleanUpAfter(ns, closer);
  const service = await startTestWorkerService({
    modelUrl: scripted.server.url,
    engramHome,
    queues: 'extract',
    closer,
    backendEnv: backend.env(),
    namespace: ns,
    env: {
      ENGRAM_CONCURRENCY_EXTRACT: String(N),
      ...(mode === 'auto' ? {} : { ENGRAM_EXTRACT_STAGED: mode === 'staged' ? '1' : '0' }),
    },
  });
  const producer = closer.add(new JobProducer(service.engine));
  const queue = producer.queue('extract');
  const ids: string[] = [];
  for (const s of sessions) ids.push((await producer.enqueue('extract', s.fg.extractPayload(s.leaf))).jobId);
  const results: ExtractResult[] = [];
  for (const id of ids) {
    results.push((await waitForFinishedJob(queue, id, 60_000)).returnvalue as ExtractResult);
  }
  await service.stop('test');
  const memoryDir = sessions[0]!.fg.paths.memoryDir;
  const files: Record<string, string[]> = {};
  for (const name of readdirSync(memoryDir).filter((n) => n.endsWith('.md') && n !== 'MEMORY.md')) {
    files[name] = body(readFileSync(join(memoryDir, name), 'utf8'));
  }
  const pointers = parseIndexEntries(readFileSync(join(memoryDir, 'MEMORY.md'), 'utf8')).map((e) => e.file);
  // No staging copy is left behind.
  if (existsSync(join(memoryDir, '.staging'))) expect(readdirSync(join(memoryDir, '.staging'))).toEqual([]);
  return { maxRunning, forks, results, files, pointers };
}

describe.each(WORKER_TEST_BACKENDS.filter(([kind]) => kind === 'redis'))(
  'staged extraction on %s',
  (_k, backend) => {
    it('runs one project’s forks in parallel and ends with exactly the serial run’s memories and pointers', async () => {
      const serial = await runProject('serial', backend);
      const staged = await runProject('staged', backend);
      // The default: the first job, alone, holds the lease for its fork; the ones arriving meanwhile go staged.
      const auto = await runProject('auto', backend);

      expect(serial.maxRunning).toBe(1);
      expect(staged.maxRunning).toBeGreaterThanOrEqual(2);
      for (const r of [...serial.results, ...staged.results]) expect(r.outcome).toBe('extracted');
      const expected: Record<string, string[]> = { project_shared: [] };
      for (let i = 0; i < N; i++) {
        expected[`project_s${i}.md`] = [`S${i}`];
        expected.project_shared!.push(`fact of session ${i}`);
      }
      expected['project_shared.md'] = expected.project_shared!.sort();
      delete expected.project_shared;
      expect(serial.files).toEqual(expected);
      expect(staged.files).toEqual(serial.files);
      // Auto: the jobs mark themselves in flight in one atomic step, so of the jobs starting together every one
      // but the first sees another and forks staged beside it; the result is the serial run's.
      expect(auto.maxRunning).toBeGreaterThanOrEqual(2);
      expect(auto.files).toEqual(serial.files);
      expect([...auto.pointers].sort()).toEqual([...serial.pointers].sort());
      // One pointer per file, in both runs.
      expect([...serial.pointers].sort()).toEqual(Object.keys(expected).sort());
      expect([...staged.pointers].sort()).toEqual([...serial.pointers].sort());
      // The shared file conflicted: some staged forks re-ran on a fresh view (the serial run forks once each).
      expect(serial.forks).toBe(N);
      expect(staged.forks).toBeGreaterThan(N);
      // Every session's own memory is credited to its job, exactly once.
      for (let i = 0; i < N; i++) {
        const own = staged.results.filter((r) => r.memories.some((m) => m.path === `project_s${i}.md`));
        expect(own).toHaveLength(1);
      }
    }, 120_000);

    it('a retry whose interrupted commit cannot be rolled forward, and whose re-fork finds nothing new, drops that journal and its copy', async () => {
      const fg = createForeground(scripted.server);
      mkdirSync(fg.paths.memoryDir, { recursive: true });
      // Someone else wrote the file the earlier attempt meant to create: its roll-forward cannot land it.
      const theirs = '---\nname: Theirs\ndescription: written meanwhile\ntype: project\n---\ntheirs\n';
      writeFileSync(join(fg.paths.memoryDir, 'project_x.md'), theirs);
      scripted.server.reset();
      scripted.server.route(
        'parent',
        (r) => !isExtractionRequest(r.body),
        () => textReply('Noted.'),
        {
          sticky: true,
        },
      );
      let forks = 0;
      scripted.server.route(
        'extract',
        (r) => isExtractionRequest(r.body),
        (r): ScriptStep => {
          if (lastUserText(r.body).includes(MARK)) forks++;
          return textReply('Nothing new to save.');
        },
        { sticky: true },
      );
      const leaf = await fg.turn('nothing worth remembering');
      const ns = uniquePrefix('staged-stale-journal');
      backend.cleanUpAfter(ns, closer);
      const engine = closer.add(
        await openQueueEngine({ config: backend.config(), profile: 'worker', namespace: ns }),
      );
      const producer = closer.add(new JobProducer(engine));
      const { jobId } = await producer.enqueue('extract', fg.extractPayload(leaf));
      // What an earlier attempt of this job left when it was killed mid-commit: its journal and copy.
      const copy = join(fg.paths.memoryDir, '.staging', `${jobId}-0badc0de`);
      mkdirSync(copy, { recursive: true });
      writeFileSync(join(copy, 'project_x.md'), 'mine');
      await engine.state.setJson(
        `extract-commit:${jobId}`,
        {
          v: 1,
          stagingDir: copy,
          files: { 'project_x.md': { from: null, to: hashContent('mine') } },
          indexes: {},
          indexBefore: {},
          carried: {},
        },
        60_000,
      );
      await startTestWorkerService({
        modelUrl: scripted.server.url,
        engramHome: fg.engramHome,
        queues: 'extract',
        closer,
        backendEnv: backend.env(),
        namespace: ns,
        env: { ENGRAM_EXTRACT_STAGED: '1' },
      });
      const job = await waitForFinishedJob(producer.queue('extract'), jobId, 60_000);
      const result = job.returnvalue as ExtractResult;
      expect(result.outcome).toBe('extracted');
      expect(result.memories).toEqual([]);
      expect(forks).toBe(1);
      expect(readFileSync(join(fg.paths.memoryDir, 'project_x.md'), 'utf8')).toBe(theirs);
      expect(await engine.state.getJson(`extract-commit:${jobId}`)).toBeUndefined();
      expect(existsSync(copy)).toBe(false);
      expect(readdirSync(join(fg.paths.memoryDir, '.staging'))).toEqual([]);
    }, 90_000);

    it('a staging copy that loses its files under the fork publishes no deletion: the live memories stay, the retry commits', async () => {
      const fg = createForeground(scripted.server);
      mkdirSync(fg.paths.memoryDir, { recursive: true });
      const kept = '---\nname: Keep\ndescription: an older memory\ntype: project\n---\nkeep me\n';
      writeFileSync(join(fg.paths.memoryDir, 'project_keep.md'), kept);
      writeFileSync(fg.paths.memoryIndexPath, '- [Keep](project_keep.md) — an older memory\n');
      scripted.server.reset();
      scripted.server.route(
        'parent',
        (r) => !isExtractionRequest(r.body),
        () => textReply('Noted.'),
        {
          sticky: true,
        },
      );
      let forks = 0;
      let dir = '';
      scripted.server.route(
        'extract',
        (r) => isExtractionRequest(r.body),
        (r): ScriptStep => {
          const last = lastUserText(r.body);
          if (last.includes(MARK)) {
            forks++;
            dir = /the memory directory `([^`]+)`/.exec(last)![1]!;
            return reply(
              text('Saving.'),
              toolUse('Write', {
                file_path: join(dir, 'project_new.md'),
                content: '---\nname: New\ndescription: a new fact\ntype: project\n---\nnew fact\n',
              }),
            );
          }
          // The first fork's copy (the one below `.staging`: the fork names the live path) disappears before
          // its commit (removed from under a stalled attempt, or by hand): its tree is empty, which must not
          // read as "every memory deleted".
          if (forks === 1) {
            const copies = readdirSync(join(dir, '.staging'));
            expect(copies).toHaveLength(1);
            rmSync(join(dir, '.staging', copies[0]!), { recursive: true, force: true });
          }
          return textReply('Saved.');
        },
        { sticky: true },
      );
      const leaf = await fg.turn('remember the new fact');
      const ns = uniquePrefix('staged-lost-copy');
      backend.cleanUpAfter(ns, closer);
      const service = await startTestWorkerService({
        modelUrl: scripted.server.url,
        engramHome: fg.engramHome,
        queues: 'extract',
        closer,
        backendEnv: backend.env(),
        namespace: ns,
        env: { ENGRAM_EXTRACT_STAGED: '1' },
      });
      const producer = closer.add(
        new JobProducer(service.engine, {
          config: { extract: { backoff: { type: 'exponential', delayMs: 50, jitter: 0 } } },
        }),
      );
      const { jobId } = await producer.enqueue('extract', fg.extractPayload(leaf));
      const job = await waitForFinishedJob(producer.queue('extract'), jobId, 60_000);
      // The first attempt published nothing and was retried; the second committed.
      expect(await job.getState()).toBe('completed');
      expect(job.failedReason).toContain('staging copy lost');
      expect(forks).toBe(2);
      expect((job.returnvalue as ExtractResult).memories.map((m) => m.path)).toEqual(['project_new.md']);
      expect(readFileSync(join(fg.paths.memoryDir, 'project_keep.md'), 'utf8')).toBe(kept);
      const pointers = parseIndexEntries(readFileSync(fg.paths.memoryIndexPath, 'utf8')).map((e) => e.file);
      expect(pointers.sort()).toEqual(['project_keep.md', 'project_new.md']);
    }, 90_000);

    it('a tenant’s staged copy lies in its own area: its fork writes there, never into another tenant’s memory', async () => {
      const engramHome = mkdtempSync(join(tmpdir(), 'engram-staged-tenants-'));
      const cwd = mkdtempSync(join(tmpdir(), 'engram-staged-tenant-repo-'));
      const acme = createForeground(scripted.server, { engramHome: tenantHomeDir(engramHome, 'acme'), cwd });
      const rival = createForeground(scripted.server, {
        engramHome: tenantHomeDir(engramHome, 'rival'),
        cwd,
      });
      mkdirSync(rival.paths.memoryDir, { recursive: true });
      const rivalSecret = '---\nname: Rival\ndescription: rival only\ntype: project\n---\nrival-only-7f3a\n';
      writeFileSync(join(rival.paths.memoryDir, 'project_rival.md'), rivalSecret);
      scripted.server.reset();
      scripted.server.route(
        'parent',
        (r) => !isExtractionRequest(r.body),
        () => textReply('Noted.'),
        {
          sticky: true,
        },
      );
      const dirs: string[] = [];
      const copies: string[] = [];
      const bodies: string[] = [];
      scripted.server.route(
        'extract',
        (r) => isExtractionRequest(r.body),
        (r): ScriptStep => {
          bodies.push(JSON.stringify(r.body.messages));
          const last = lastUserText(r.body);
          if (!last.includes(MARK)) return textReply('Saved.');
          const dir = /the memory directory `([^`]+)`/.exec(last)![1]!;
          dirs.push(dir);
          // The fork's copy, where its writes land (the fork itself is told the live path).
          const copy = join(
            acme.paths.memoryDir,
            '.staging',
            readdirSync(join(acme.paths.memoryDir, '.staging'))[0]!,
          );
          copies.push(copy);
          return reply(
            text('Saving.'),
            // Positive control: inside its own copy.
            toolUse('Write', {
              file_path: join(dir, 'project_acme.md'),
              content: '---\nname: Acme\ndescription: acme fact\ntype: project\n---\nacme\n',
            }),
            // Outside it: the other tenant's memory (write and read), and this tenant's area outside its
            // memory directory.
            toolUse('Write', {
              file_path: join(rival.paths.memoryDir, 'project_rival.md'),
              content: 'pwned',
            }),
            toolUse('Read', { file_path: join(rival.paths.memoryDir, 'project_rival.md') }),
            toolUse('Write', { file_path: join(dir, '..', 'project_live.md'), content: 'live' }),
          );
        },
        { sticky: true },
      );
      const leaf = await acme.turn('remember the acme fact');
      const ns = uniquePrefix('staged-tenant');
      backend.cleanUpAfter(ns, closer);
      const service = await startTestWorkerService({
        modelUrl: scripted.server.url,
        engramHome,
        queues: 'extract',
        closer,
        backendEnv: backend.env(),
        namespace: ns,
        env: { ENGRAM_EXTRACT_STAGED: '1' },
      });
      const producer = closer.add(new JobProducer(service.engine));
      const { jobId } = await producer.enqueue('extract', { ...acme.extractPayload(leaf), tenant: 'acme' });
      const job = await waitForFinishedJob(producer.queue('extract'), jobId, 60_000);
      expect(job.failedReason).toBeUndefined();
      const result = job.returnvalue as ExtractResult;
      expect(result.outcome).toBe('extracted');
      expect(result.memories.map((m) => m.path)).toEqual(['project_acme.md']);
      expect(result.deniedToolCalls).toBeGreaterThanOrEqual(2);
      // The fork was told the live directory; its copy was inside acme's own memory directory, so its area.
      expect(dirs[0]).toBe(acme.paths.memoryDir);
      expect(copies[0]!.startsWith(join(acme.paths.memoryDir, '.staging'))).toBe(true);
      expect(copies[0]!.startsWith(tenantHomeDir(engramHome, 'acme'))).toBe(true);
      expect(readFileSync(join(acme.paths.memoryDir, 'project_acme.md'), 'utf8')).toContain('acme');
      expect(existsSync(join(acme.paths.memoryDir, '..', 'project_live.md'))).toBe(false);
      expect(existsSync(copies[0]!)).toBe(false);
      expect(readFileSync(join(rival.paths.memoryDir, 'project_rival.md'), 'utf8')).toBe(rivalSecret);
      // The rival's bytes never reached the model.
      expect(bodies.some((b) => b.includes('rival-only-7f3a'))).toBe(false);
    }, 90_000);
  },
);
