import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { walk } from '@engram/fs-walk/walk';
import {
  listSnapshots,
  restoreSnapshot,
  SnapshotError,
  snapshotDir,
} from '@engram/memory-core/dream/snapshot';
import {
  loadMemoryIndex,
  MAX_ENTRYPOINT_CHARS,
  MAX_ENTRYPOINT_LINES,
  parseIndexEntries,
} from '@engram/memory-core/memdir/index-file';
import { parseMemoryLinks } from '@engram/memory-core/memdir/links';
import { listMemories } from '@engram/memory-core/memdir/memory-files';
import { engramPathsFromDirNames, PROJECTS_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { Hono } from 'hono';
import type { WorkersConfig } from '../config.js';
import { formatAge, type OperationsReport, operationsChecks } from '../operations.js';
import { jobKindOfQueue } from './job-kinds.js';
import { diffLines, type LineDiff } from './line-diff.js';

// The memory browser next to the dashboard (`/memories`): what Engram knows, per project, without a terminal —
// the index exactly as the model sees it (with its caps), each memory (type, description, age, links), the
// receipts of recent jobs (what was saved or recalled, by which session), and the consolidation history with
// each snapshot's diff. Server-rendered HTML, every value escaped. Read-only unless the dashboard is writable
// (ENGRAM_DASHBOARD_READONLY=0); then a snapshot can be restored with a form that carries a per-process token
// (no cross-site POST can), behind the same guard as the dashboard.

/** What the browser reads of a queue: its name and its finished jobs (a BullMQ Queue is one). */
export interface JobSource {
  name: string;
  getJobs(
    types: Array<'completed' | 'failed'>,
    start: number,
    end: number,
    asc: boolean,
  ): Promise<
    Array<
      | {
          id?: string | undefined;
          data: unknown;
          returnvalue: unknown;
          failedReason: string;
          finishedOn?: number | undefined;
          timestamp: number;
        }
      | undefined
    >
  >;
}

export interface MemoryBrowserDeps {
  config: WorkersConfig;
  /** The service's queues (as BullMQ names them), for the receipts of recent jobs. */
  queues: JobSource[];
  /** Is a consolidation of this project running? Restores wait for it. */
  consolidationRunning?: (projectDir: string) => Promise<boolean>;
  /** Outbox backlogs and the reconcile sweep's last run, shown on the front page. */
  operations?: () => Promise<OperationsReport>;
}

const PROJECT_NAME = /^[A-Za-z0-9-]{1,250}$/;
/** How many recent jobs per queue the receipts section reads. */
const RECENT_JOBS = 200;
const MAX_MEMORY_BYTES = 256 * 1024;

export function escapeHtml(value: unknown): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:10px 20px}header a{color:#fff;text-decoration:none;margin-right:16px}
main{padding:16px 20px;max-width:1200px}section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;margin:0 0 16px}
h1{font-size:20px}h2{font-size:16px;margin:4px 0 10px}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #eaeef2;padding:4px 8px;text-align:left;vertical-align:top}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap}.ok{color:#1a7f37}.warn{color:#9a6700}.bad{color:#cf222e}
.add{background:#dafbe1}.del{background:#ffebe9}.type{font-weight:600}code{background:#eff1f3;padding:0 3px}
button{padding:4px 10px}button[disabled]{opacity:.6}
</style></head><body><header><a href="/memories">Engram memories</a><a href="/dashboard">Queues</a></header>
<main>${body}</main></body></html>`;
}

interface Project {
  name: string;
  memoryDir: string;
  indexPath: string;
}

function projectFor(config: WorkersConfig, name: string): Project {
  const paths = engramPathsFromDirNames({
    engramHome: config.engramHome,
    projectDirName: name,
    transcriptDirName: name,
    memoryDirOverride: config.memoryDirOverride,
  });
  return { name, memoryDir: paths.memoryDir, indexPath: paths.memoryIndexPath };
}

async function listProjects(config: WorkersConfig): Promise<Array<{ name: string; memories: number }>> {
  const root = join(config.engramHome, PROJECTS_DIRNAME);
  const names = await fs.readdir(root).catch(() => [] as string[]);
  const out: Array<{ name: string; memories: number }> = [];
  for (const name of names.sort()) {
    if (!PROJECT_NAME.test(name)) continue;
    const project = projectFor(config, name);
    const stat = await fs.stat(project.memoryDir).catch(() => undefined);
    if (!stat?.isDirectory()) continue;
    const { memories } = await listMemories(project.memoryDir);
    out.push({ name, memories: memories.length });
  }
  return out;
}

interface Receipt {
  queue: string;
  jobId: string;
  finishedAt: number;
  sessionId: string;
  state: 'completed' | 'failed';
  what: string;
}

function describeJob(queue: string, job: { returnvalue?: unknown; failedReason?: string }): string {
  const r = (job.returnvalue ?? {}) as Record<string, unknown>;
  if (job.failedReason) return `failed: ${job.failedReason}`;
  if (queue === 'extract') {
    const memories = (r.memories as Array<{ path: string; action: string }> | undefined) ?? [];
    return memories.length
      ? `saved ${memories.map((m) => `${m.path} (${m.action})`).join(', ')}`
      : `nothing saved (${String(r.outcome ?? 'done')})`;
  }
  if (queue === 'recall') {
    const attachments = (r.attachments as Array<{ path: string }> | undefined) ?? [];
    return attachments.length
      ? `recalled ${attachments.map((a) => a.path).join(', ')} (${String(r.outcome)})`
      : `recalled nothing (${String(r.outcome ?? 'empty')})`;
  }
  if (queue === 'dream') {
    const files = (r.files ?? {}) as Record<string, string[] | undefined>;
    const counts = ['created', 'updated', 'deleted'].map((k) => `${files[k]?.length ?? 0} ${k}`).join(', ');
    return `${String(r.outcome ?? 'done')}: ${counts}`;
  }
  return String(r.outcome ?? 'done');
}

async function recentReceipts(queues: JobSource[], projectDir: string): Promise<Receipt[]> {
  const out: Receipt[] = [];
  for (const queue of queues) {
    const jobs = await queue.getJobs(['completed', 'failed'], 0, RECENT_JOBS - 1, false).catch(() => []);
    for (const job of jobs) {
      const data = (job?.data ?? {}) as { projectDir?: string; sessionId?: string; triggeredBy?: string };
      if (!job || data.projectDir !== projectDir) continue;
      out.push({
        queue: jobKindOfQueue(queue.name) ?? queue.name,
        jobId: String(job.id),
        finishedAt: job.finishedOn ?? job.timestamp,
        sessionId: data.sessionId ?? data.triggeredBy ?? '—',
        state: job.failedReason ? 'failed' : 'completed',
        what: describeJob(jobKindOfQueue(queue.name) ?? queue.name, job),
      });
    }
  }
  return out.sort((a, b) => b.finishedAt - a.finishedAt).slice(0, 50);
}

/** Markdown files of a directory tree (memory dir or snapshot), relative paths → content; .history skipped. */
async function readTree(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  // The one walker: hidden entries (.history, temp files) skipped, symlinks neither listed nor followed.
  const { files } = await walk(dir, { include: (name) => name.endsWith('.md') });
  for (const file of files) {
    const stat = await fs.stat(file.path).catch(() => undefined);
    if (!stat?.isFile()) continue;
    out.set(
      file.rel,
      stat.size > MAX_MEMORY_BYTES ? '(file too large to show)' : await fs.readFile(file.path, 'utf8'),
    );
  }
  return out;
}

function renderDiff(before: Map<string, string>, after: Map<string, string>): string {
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort();
  const parts: string[] = [];
  for (const path of paths) {
    const a = before.get(path);
    const b = after.get(path);
    if (a === b) continue;
    const label = a === undefined ? 'added' : b === undefined ? 'removed' : 'changed';
    const lines: LineDiff[] = diffLines(a ?? '', b ?? '');
    const body = lines
      .map((l) =>
        l.op === '+'
          ? `<span class="add">+ ${escapeHtml(l.text)}</span>`
          : l.op === '-'
            ? `<span class="del">- ${escapeHtml(l.text)}</span>`
            : `  ${escapeHtml(l.text)}`,
      )
      .join('\n');
    parts.push(
      `<div class="file-diff"><strong>${escapeHtml(path)}</strong> (${label})<pre>${body}</pre></div>`,
    );
  }
  return parts.length ? parts.join('') : '<p>No differences.</p>';
}

function age(ms: number): string {
  return `${formatAge(Date.now() - ms)} ago`;
}

/**
 * The "Memory work" section: outboxes (work waiting to be queued) and the reconcile sweep's last run, the
 * same checks `engram doctor` prints.
 */
async function renderOperations(operations: MemoryBrowserDeps['operations']): Promise<string> {
  if (!operations) return '';
  let report: OperationsReport;
  try {
    report = await operations();
  } catch (error) {
    return `<section id="operations"><h2>Memory work</h2><p class="bad">Could not read the outboxes or the reconcile state: ${escapeHtml((error as Error).message)}</p></section>`;
  }
  const rows = operationsChecks(report)
    .map(
      (check) =>
        `<tr class="check ${check.ok ? 'ok' : 'bad'}"><td>${check.ok ? 'ok' : 'FAIL'}</td><td>${escapeHtml(check.name)}</td><td>${escapeHtml(check.detail)}${check.fix ? `<br><small>fix: ${escapeHtml(check.fix)}</small>` : ''}</td></tr>`,
    )
    .join('');
  return `<section id="operations"><h2>Memory work</h2><table><thead><tr><th></th><th>check</th><th>detail</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

export function createMemoryBrowser(deps: MemoryBrowserDeps): Hono {
  const app = new Hono();
  const { config } = deps;
  const readOnly = config.dashboard.readOnly;
  // Forms carry an HMAC of the action under a per-process secret: a page of this server can post, a foreign
  // page cannot (it can neither read our pages nor compute the token).
  const secret = randomBytes(32);
  const formToken = (action: string) => createHmac('sha256', secret).update(action).digest('hex');
  const tokenOk = (action: string, token: string | undefined) => {
    const want = Buffer.from(formToken(action));
    const got = Buffer.from(token ?? '');
    return got.length === want.length && timingSafeEqual(got, want);
  };
  const auth = (c: { req: { query(k: string): string | undefined } }) => {
    const t = c.req.query('token');
    return t ? `?token=${encodeURIComponent(t)}` : '';
  };

  app.get('/', async (c) => {
    const projects = await listProjects(config);
    const operations = await renderOperations(deps.operations);
    const rows = projects
      .map(
        (p) =>
          `<tr><td><a href="/memories/p/${escapeHtml(p.name)}${escapeHtml(auth(c))}">${escapeHtml(p.name)}</a></td><td>${p.memories}</td></tr>`,
      )
      .join('');
    return c.html(
      page(
        'Engram memories',
        `<h1>Projects</h1><section>${
          projects.length
            ? `<table><thead><tr><th>project</th><th>memories</th></tr></thead><tbody>${rows}</tbody></table>`
            : `<p>No memories yet under ${escapeHtml(config.engramHome)}.</p>`
        }</section>${operations}`,
      ),
    );
  });

  app.get('/p/:project', async (c) => {
    const name = c.req.param('project');
    if (!PROJECT_NAME.test(name)) return c.html(page('Not found', '<p>No such project.</p>'), 404);
    const project = projectFor(config, name);
    const stat = await fs.stat(project.memoryDir).catch(() => undefined);
    if (!stat?.isDirectory())
      return c.html(page('Not found', `<p>No memory for ${escapeHtml(name)}.</p>`), 404);

    const index = await loadMemoryIndex(project.indexPath);
    const rawLines = index.raw ? index.raw.replace(/\n$/, '').split('\n').length : 0;
    const entries = parseIndexEntries(index.raw);
    const cap = index.overflow
      ? `<p class="warn">Over its cap: ${rawLines} lines / ${index.raw.length} characters (limit ${MAX_ENTRYPOINT_LINES} lines, ${MAX_ENTRYPOINT_CHARS} characters) — the model sees it cut, as below.</p>`
      : `<p class="ok">Within its cap: ${rawLines} of ${MAX_ENTRYPOINT_LINES} lines, ${index.raw.length} of ${MAX_ENTRYPOINT_CHARS} characters.</p>`;

    const { memories, problems } = await listMemories(project.memoryDir);
    const memoryRows: string[] = [];
    for (const m of memories) {
      const body = await fs.readFile(m.path, 'utf8').catch(() => '');
      const links = parseMemoryLinks(body);
      const indexed = entries.some((e) => e.file === m.file);
      memoryRows.push(
        `<tr class="memory" data-file="${escapeHtml(m.file)}"><td class="type">${escapeHtml(m.type ?? '—')}</td><td>${escapeHtml(m.file)}${indexed ? '' : ' <span class="warn">(not in MEMORY.md)</span>'}</td><td>${escapeHtml(m.name ?? '')}</td><td>${escapeHtml(m.description ?? '')}</td><td>${escapeHtml(m.age)}</td><td>${links.map((l) => `<code>[[${escapeHtml(l)}]]</code>`).join(' ')}</td></tr>`,
      );
    }
    const problemList = problems.length
      ? `<ul>${problems.map((p) => `<li class="bad">${escapeHtml(p.filename)}: ${escapeHtml(p.message)}</li>`).join('')}</ul>`
      : '';

    const receipts = await recentReceipts(deps.queues, name);
    const receiptRows = receipts
      .map(
        (r) =>
          `<tr class="receipt ${r.state}"><td>${escapeHtml(age(r.finishedAt))}</td><td>${escapeHtml(r.queue)}</td><td>${escapeHtml(r.sessionId)}</td><td>${escapeHtml(r.what)}</td></tr>`,
      )
      .join('');

    const snapshots = await listSnapshots(project.memoryDir);
    const current = await readTree(project.memoryDir);
    const history: string[] = [];
    for (let i = snapshots.length - 1; i >= 0; i--) {
      const s = snapshots[i]!;
      const before = await readTree(snapshotDir(project.memoryDir, s.id));
      const next = snapshots[i + 1];
      const after = next ? await readTree(snapshotDir(project.memoryDir, next.id)) : current;
      const action = `restore:${name}:${s.id}`;
      const form = readOnly
        ? '<p><button disabled title="read-only">Restore</button> Read-only: set ENGRAM_DASHBOARD_READONLY=0 (with a dashboard token or password) to allow restores.</p>'
        : `<form method="post" action="/memories/p/${escapeHtml(name)}/restore/${escapeHtml(s.id)}${escapeHtml(auth(c))}"><input type="hidden" name="form_token" value="${formToken(action)}"><button type="submit">Restore this snapshot</button> (the current state is kept as a new snapshot)</form>`;
      history.push(
        `<div class="snapshot" data-id="${escapeHtml(s.id)}"><h3>${escapeHtml(s.createdAt)} — ${escapeHtml(s.label ?? '')} (${s.files.length} files)</h3><p>Changes from this snapshot to ${next ? `the next snapshot (${escapeHtml(next.createdAt)})` : 'the current memory'}:</p>${renderDiff(before, after)}${form}</div>`,
      );
    }

    return c.html(
      page(
        `Memories — ${name}`,
        `<h1>${escapeHtml(name)}</h1>
<section id="index"><h2>MEMORY.md as the model sees it</h2>${
          index.exists ? `${cap}<pre>${escapeHtml(index.content)}</pre>` : '<p>No MEMORY.md yet.</p>'
        }</section>
<section id="memories"><h2>Memories (${memories.length})</h2>${
          memories.length
            ? `<table><thead><tr><th>type</th><th>file</th><th>name</th><th>description</th><th>age</th><th>links</th></tr></thead><tbody>${memoryRows.join('')}</tbody></table>`
            : '<p>No memory files.</p>'
        }${problemList}</section>
<section id="receipts"><h2>Recent jobs</h2>${
          receipts.length
            ? `<table><thead><tr><th>when</th><th>queue</th><th>session</th><th>what</th></tr></thead><tbody>${receiptRows}</tbody></table>`
            : '<p>No recent jobs for this project.</p>'
        }</section>
<section id="history"><h2>Consolidation history</h2>${history.length ? history.join('') : '<p>No snapshots yet (a consolidation takes one before it writes).</p>'}</section>`,
      ),
    );
  });

  app.post('/p/:project/restore/:id', async (c) => {
    const name = c.req.param('project');
    const id = c.req.param('id');
    if (readOnly) {
      return c.text(
        'Forbidden: the memory browser is read-only. Set ENGRAM_DASHBOARD_READONLY=0 (with ENGRAM_DASHBOARD_TOKEN or a password) to allow restores.',
        403,
      );
    }
    if (!PROJECT_NAME.test(name)) return c.text('No such project.', 404);
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const token = typeof form.form_token === 'string' ? form.form_token : undefined;
    if (!tokenOk(`restore:${name}:${id}`, token))
      return c.text('Forbidden: reload the page and use its Restore button.', 403);
    if (await deps.consolidationRunning?.(name))
      return c.text('A consolidation of this project is running; restore when it has finished.', 409);
    const project = projectFor(config, name);
    try {
      const result = await restoreSnapshot(project.memoryDir, id, {
        backupLabel: 'before restore from the memory browser',
      });
      return c.html(
        page(
          'Restored',
          `<section><p class="ok">Restored ${result.restored.length} file(s) from ${escapeHtml(result.id)}${
            result.removed.length ? `, removed ${result.removed.length} created after it` : ''
          }.${result.backupId ? ` The previous state is snapshot ${escapeHtml(result.backupId)}.` : ''}</p><p><a href="/memories/p/${escapeHtml(name)}${escapeHtml(auth(c))}">Back to ${escapeHtml(name)}</a></p></section>`,
        ),
      );
    } catch (error) {
      if (error instanceof SnapshotError) return c.text(`Cannot restore: ${error.message}`, 400);
      throw error;
    }
  });

  return app;
}
