import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
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

// A staged fork (docs/concurrency.md) is told the live memory directory, as a serial fork is: the pipeline
// aliases that path onto the fork's private copy (agent-runtime's `PathAlias`), so its request is a serial
// fork's — the parent's cached system prompt and tools — and nothing it is sent names the copy. Its writes to
// the live path land in the copy and reach the live directory only at the commit; a path that leaves the copy
// (a link planted in it, `..`, another job's copy) is refused.

const scripted = useModelServer();
const { closer } = scripted;
const MARK = 'You are now the memory extraction subagent';
const KEEP = '---\nname: Keep\ndescription: an older memory\ntype: project\n---\nkeep me\n';

type Block = { type: string; id?: string; tool_use_id?: string; is_error?: boolean; content?: unknown };

/** The tool results in a request's last message, by tool_use id, as the model sees them. */
function toolResults(body: {
  messages: Array<{ content: unknown }>;
}): Map<string, { text: string; error: boolean }> {
  const last = body.messages.at(-1)?.content;
  const out = new Map<string, { text: string; error: boolean }>();
  for (const b of Array.isArray(last) ? (last as Block[]) : []) {
    if (b.type !== 'tool_result' || !b.tool_use_id) continue;
    const content = b.content;
    const value =
      typeof content === 'string'
        ? content
        : (content as Array<{ text?: string }>).map((c) => c.text ?? '').join('');
    out.set(b.tool_use_id, { text: value, error: b.is_error === true });
  }
  return out;
}

describe.each(WORKER_TEST_BACKENDS.filter(([kind]) => kind === 'redis'))(
  'a staged fork sees the live memory path on %s',
  (_k, backend) => {
    it('its request is the serial fork’s: the same system and tools, the live directory in its instruction, no copy path anywhere', async () => {
      const engramHome = mkdtempSync(join(tmpdir(), 'engram-alias-home-'));
      const cwd = mkdtempSync(join(tmpdir(), 'engram-alias-repo-'));
      scripted.server.reset();
      scripted.server.route(
        'parent',
        (r) => !isExtractionRequest(r.body),
        () => textReply('Noted.'),
        { sticky: true },
      );
      const sessionOf = (body: { messages: unknown }) =>
        Number(/session (\d+) says/.exec(JSON.stringify(body.messages))?.[1]);
      scripted.server.route(
        'extract',
        (r) => isExtractionRequest(r.body),
        (r): ScriptStep => {
          const last = lastUserText(r.body);
          if (!last.includes(MARK)) return textReply('Saved.');
          const dir = /the memory directory `([^`]+)`/.exec(last)![1]!;
          const n = sessionOf(r.body);
          // Every file tool (and Bash) on the path the instruction names; each result echoes a path.
          return reply(
            text('Saving.'),
            toolUse('Read', { file_path: join(dir, 'project_keep.md') }, `read-${n}`),
            toolUse('Glob', { pattern: '*.md', path: dir }, `glob-${n}`),
            toolUse('Grep', { pattern: 'keep', path: dir, output_mode: 'content' }, `grep-${n}`),
            toolUse('Bash', { command: `ls -a ${dir}` }, `bash-${n}`),
            toolUse('Read', { file_path: join(dir, 'missing.md') }, `missing-${n}`),
            toolUse(
              'Write',
              {
                file_path: join(dir, `project_s${n}.md`),
                content: `---\nname: S${n}\ndescription: fact ${n}\ntype: project\n---\nfact ${n}\n`,
              },
              `write-${n}`,
            ),
          );
        },
        { sticky: true },
      );
      // Two sessions of one project, one turn each: the first extracted serial, the second staged.
      const fgs = [1, 2].map(() => createForeground(scripted.server, { engramHome, cwd }));
      const memoryDir = fgs[0]!.paths.memoryDir;
      mkdirSync(memoryDir, { recursive: true });
      writeFileSync(join(memoryDir, 'project_keep.md'), KEEP);
      writeFileSync(join(memoryDir, 'MEMORY.md'), '- [Keep](project_keep.md) — an older memory\n');
      const leaves = [];
      for (const [i, fg] of fgs.entries()) leaves.push(await fg.turn(`session ${i + 1} says: remember fact`));

      const results: ExtractResult[] = [];
      for (const [i, staged] of [false, true].entries()) {
        const ns = uniquePrefix(staged ? 'alias-staged' : 'alias-serial');
        backend.cleanUpAfter(ns, closer);
        const service = await startTestWorkerService({
          modelUrl: scripted.server.url,
          engramHome,
          queues: 'extract',
          closer,
          backendEnv: backend.env(),
          namespace: ns,
          env: { ENGRAM_EXTRACT_STAGED: staged ? '1' : '0' },
        });
        const producer = closer.add(new JobProducer(service.engine));
        const { jobId } = await producer.enqueue('extract', fgs[i]!.extractPayload(leaves[i]!));
        const job = await waitForFinishedJob(producer.queue('extract'), jobId, 60_000);
        expect(job.failedReason).toBeUndefined();
        results.push(job.returnvalue as ExtractResult);
        await service.stop('test');
      }
      expect(results.map((r) => r.memories.map((m) => m.path))).toEqual([
        ['project_s1.md'],
        ['project_s2.md'],
      ]);
      // No fork lost a turn to a refused write: read and write in turn 1, done in turn 2; the staged fork was
      // refused nothing the serial one was not (Bash only where this host has no sandbox).
      expect(results.map((r) => r.turns)).toEqual([2, 2]);
      expect(results[1]!.deniedToolCalls).toBe(results[0]!.deniedToolCalls);
      expect(results[0]!.deniedToolCalls).toBeLessThanOrEqual(1);

      const forkRequests = (n: number) =>
        scripted.server.messageRequests('extract').filter((r) => sessionOf(r.body) === n);
      const serial = forkRequests(1);
      const staged = forkRequests(2);
      expect(serial).toHaveLength(2);
      expect(staged).toHaveLength(2);
      // The prompt-cache prefix: the staged fork's system and tools are the serial fork's, and the parent's.
      const parent = scripted.server.messageRequests('parent').at(-1)!.body;
      for (const r of staged) {
        expect(r.body.system).toEqual(serial[0]!.body.system);
        expect(r.body.tools).toEqual(serial[0]!.body.tools);
        expect(r.body.system).toEqual(parent.system);
        expect(r.body.tools).toEqual(parent.tools);
        expect(r.body.model).toBe(serial[0]!.body.model);
        // Nothing the model is sent — instruction, tool results, refusals — names the copy.
        expect(JSON.stringify(r.body)).not.toContain('.staging');
      }
      expect(results[1]!.usage.cacheReadInputTokens).toBeGreaterThan(0);
      // Both instructions name the live directory.
      for (const r of [serial[0]!, staged[0]!]) {
        expect(/the memory directory `([^`]+)`/.exec(lastUserText(r.body))?.[1]).toBe(memoryDir);
      }
      // The staged fork's tool results: the copy's content at the live path, shown as the live path.
      const seen = toolResults(staged[1]!.body);
      expect(seen.get('read-2')).toEqual({ text: expect.stringContaining('keep me'), error: false });
      expect(seen.get('glob-2')!.text).toContain(join(memoryDir, 'project_keep.md'));
      expect(seen.get('grep-2')!.text).toContain('keep me');
      expect(seen.get('missing-2')!.error).toBe(true);
      expect(seen.get('write-2')).toEqual({
        text: `File created successfully at: ${join(memoryDir, 'project_s2.md')}`,
        error: false,
      });
      // The serial fork's Write result reads the same (positive control of the comparison).
      expect(toolResults(serial[1]!.body).get('write-1')!.text).toBe(
        `File created successfully at: ${join(memoryDir, 'project_s1.md')}`,
      );

      const pointers = parseIndexEntries(readFileSync(join(memoryDir, 'MEMORY.md'), 'utf8')).map(
        (e) => e.file,
      );
      expect(pointers.sort()).toEqual(['project_keep.md', 'project_s1.md', 'project_s2.md']);
      expect(readFileSync(join(memoryDir, 'project_s2.md'), 'utf8')).toContain('fact 2');
      expect(readdirSync(join(memoryDir, '.staging'))).toEqual([]);
    }, 120_000);

    it('its writes to the live path land in its copy and reach the live directory only at the commit; a link in the copy, `..` and another job’s copy are refused', async () => {
      const engramHome = mkdtempSync(join(tmpdir(), 'engram-alias-escape-'));
      const cwd = mkdtempSync(join(tmpdir(), 'engram-alias-escape-repo-'));
      const acme = createForeground(scripted.server, { engramHome: tenantHomeDir(engramHome, 'acme'), cwd });
      const rival = createForeground(scripted.server, {
        engramHome: tenantHomeDir(engramHome, 'rival'),
        cwd,
      });
      const live = acme.paths.memoryDir;
      mkdirSync(live, { recursive: true });
      writeFileSync(join(live, 'project_keep.md'), KEEP);
      writeFileSync(join(live, 'MEMORY.md'), '- [Keep](project_keep.md) — an older memory\n');
      mkdirSync(rival.paths.memoryDir, { recursive: true });
      const rivalFile = join(rival.paths.memoryDir, 'project_rival.md');
      const rivalSecret = '---\nname: Rival\ndescription: rival only\ntype: project\n---\nrival-only-7f3a\n';
      writeFileSync(rivalFile, rivalSecret);
      // Another job's copy of this project, in flight.
      const other = join(live, '.staging', 'otherjob-0badc0de');
      mkdirSync(other, { recursive: true });
      const otherBody = '---\nname: Other\ndescription: other copy\ntype: project\n---\nother-copy-5e1d\n';
      writeFileSync(join(other, 'project_other.md'), otherBody);
      const escaped = join(dirname(live), 'escape.md');

      scripted.server.reset();
      scripted.server.route(
        'parent',
        (r) => !isExtractionRequest(r.body),
        () => textReply('Noted.'),
        { sticky: true },
      );
      const liveFiles = () =>
        Object.fromEntries(
          readdirSync(live)
            .filter((n) => !n.startsWith('.'))
            .map((n) => [n, readFileSync(join(live, n), 'utf8')]),
        );
      const before = liveFiles();
      let copy = '';
      let liveAtTurn2: Record<string, string> | undefined;
      let copyAtTurn2: string[] = [];
      const bodies: string[] = [];
      scripted.server.route(
        'extract',
        (r) => isExtractionRequest(r.body),
        (r): ScriptStep => {
          bodies.push(JSON.stringify(r.body));
          const last = lastUserText(r.body);
          if (!last.includes(MARK)) {
            liveAtTurn2 = liveFiles();
            copyAtTurn2 = readdirSync(copy).sort();
            return textReply('Saved.');
          }
          const dir = /the memory directory `([^`]+)`/.exec(last)![1]!;
          const mine = readdirSync(join(live, '.staging')).filter((n) => n !== 'otherjob-0badc0de');
          expect(mine).toHaveLength(1);
          copy = join(live, '.staging', mine[0]!);
          // Links planted in the copy (a fork cannot make one; this is the worst its directory could hold).
          symlinkSync(rivalFile, join(copy, 'project_link.md'));
          symlinkSync(rival.paths.memoryDir, join(copy, 'linkdir'));
          return reply(
            text('Saving.'),
            // Positive controls: a write and a read at the live path, in the copy.
            toolUse(
              'Write',
              {
                file_path: join(dir, 'project_acme.md'),
                content: '---\nname: Acme\ndescription: acme fact\ntype: project\n---\nacme\n',
              },
              'write-ok',
            ),
            toolUse('Read', { file_path: join(dir, 'project_keep.md') }, 'read-ok'),
            // Out through a link in the copy: reads judged on the opened file, writes refused.
            toolUse('Read', { file_path: join(dir, 'project_link.md') }, 'read-link'),
            toolUse('Read', { file_path: join(dir, 'linkdir', 'project_rival.md') }, 'read-linkdir'),
            toolUse('Write', { file_path: join(dir, 'project_link.md'), content: 'pwned' }, 'write-link'),
            toolUse(
              'Write',
              { file_path: join(dir, 'linkdir', 'project_rival.md'), content: 'pwned' },
              'write-linkdir',
            ),
            // Out by `..`.
            toolUse('Write', { file_path: `${dir}/x/../../escape.md`, content: 'pwned' }, 'write-dotdot'),
            // Another job's copy: its path maps into this fork's own copy (nothing there), never onto it.
            toolUse(
              'Read',
              { file_path: join(dir, '.staging', 'otherjob-0badc0de', 'project_other.md') },
              'read-other',
            ),
            toolUse(
              'Write',
              { file_path: join(dir, '.staging', 'otherjob-0badc0de', 'project_other.md'), content: 'pwned' },
              'write-other',
            ),
          );
        },
        { sticky: true },
      );
      const leaf = await acme.turn('remember the acme fact');
      const ns = uniquePrefix('alias-escape');
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

      // Before the commit the write was in the copy only; the live directory was as it had been.
      expect(liveAtTurn2).toEqual(before);
      expect(copyAtTurn2).toContain('project_acme.md');
      // After it, in the live directory with its one pointer; the copy is gone.
      expect(readFileSync(join(live, 'project_acme.md'), 'utf8')).toContain('acme');
      const pointers = parseIndexEntries(readFileSync(join(live, 'MEMORY.md'), 'utf8')).map((e) => e.file);
      expect(pointers.sort()).toEqual(['project_acme.md', 'project_keep.md']);
      expect(existsSync(copy)).toBe(false);

      const seen = toolResults(JSON.parse(bodies[1]!));
      expect(seen.get('write-ok')).toEqual({
        text: `File created successfully at: ${join(live, 'project_acme.md')}`,
        error: false,
      });
      expect(seen.get('read-ok')).toEqual({ text: expect.stringContaining('keep me'), error: false });
      for (const id of [
        'read-link',
        'read-linkdir',
        'write-link',
        'write-linkdir',
        'write-dotdot',
        'read-other',
        'write-other',
      ]) {
        expect(seen.get(id)?.error, id).toBe(true);
      }
      // The reads through a link were allowed by the policy and refused by the read boundary on the file
      // they opened (another tenant's); the writes never reached a file.
      expect(seen.get('read-link')!.text).toMatch(/outside/i);
      expect(seen.get('read-linkdir')!.text).toMatch(/outside/i);
      // Four policy denials (the writes): the link one only a policy judging the copy can make (the live
      // directory has no `project_link.md`); a policy over the live files would leave it to the jail.
      expect(result.deniedToolCalls).toBe(4);
      expect(readFileSync(rivalFile, 'utf8')).toBe(rivalSecret);
      expect(readFileSync(join(other, 'project_other.md'), 'utf8')).toBe(otherBody);
      expect(existsSync(escaped)).toBe(false);
      // Neither the other tenant's bytes nor the other copy's reached the model, nor this fork's copy's name.
      for (const body of bodies) {
        expect(body).not.toContain('rival-only-7f3a');
        expect(body).not.toContain('other-copy-5e1d');
        expect(body).not.toContain(copy);
        expect(body).not.toContain(copy.slice(live.length));
      }
      rmSync(other, { recursive: true, force: true });
    }, 90_000);
  },
);
