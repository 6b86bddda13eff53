import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { JobProducer } from '@engram/queue/producer';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandlers } from '../handlers.js';
import { isDreamRequest, seedDreamMemories } from '../jobs/dream.test-helpers.js';
import { createLogger } from '../logger.js';
import { startWorkerService, type WorkerService } from '../service.js';
import { launchChromium } from '../testing/chromium.test-helpers.js';
import {
  createForeground,
  type ForegroundSession,
  isExtractionRequest,
} from '../testing/foreground.test-helpers.js';
import { testWorkersConfig } from '../testing/service.test-helpers.js';
import { createHttpApp } from './server.js';

// The memory browser in real headless Chromium against a real stack (Redis, the worker service and its HTTP
// server, the scripted model): memories seeded and one saved by a real extraction job, a real consolidation
// that takes a snapshot and merges two memories. What is on screen is asserted, restore needs the guard and the
// page's own form, and a screenshot is kept in the test's artifacts directory (git-ignored).

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const TOKEN = 'browser-test-token-0123456789';
const LINKED = [
  '---',
  'name: Release checklist',
  'description: Steps before a release, see the deploy freeze',
  'type: project',
  '---',
  'Before a release, check [[project_deploy]] and [[user_role|who reviews]].',
  '',
  '`[[not_a_link]]` is code.',
  '',
].join('\n');
const MERGED =
  '---\nname: Use pnpm\ndescription: The user wants pnpm, never npm, for installs and scripts\ntype: feedback\n---\nAlways pnpm, never npm.\n';
const NEW_INDEX =
  '- [Use pnpm](feedback_pnpm.md) — pnpm, never npm\n- [Deploy freeze](project_deploy.md) — no Friday deploys\n- [Role](user_role.md) — Go backend dev\n- [Release checklist](project_release.md) — steps before a release\n';

let server: ModelServer;
let service: WorkerService;
let fg: ForegroundSession;
let browser: Browser;
let url: string;

beforeAll(async () => {
  server = await startModelServer();
  fg = createForeground(server);
  const mem = fg.paths.memoryDir;
  seedDreamMemories(mem);
  const config = testWorkersConfig({
    modelUrl: server.url,
    engramHome: fg.engramHome,
    queues: 'extract,dream',
    env: { ENGRAM_DASHBOARD_TOKEN: TOKEN, ENGRAM_DASHBOARD_READONLY: '0', ENGRAM_WORKERS_PORT: '0' },
  });
  service = await startWorkerService({ config, logger: createLogger('silent'), handlers: createHandlers });
  url = service.http!.url;

  // A real extraction: the session says something, the fork saves a memory with links.
  server.route('extract', (r) => isExtractionRequest(r.body), [
    reply(text('Saving.'), toolUse('Write', { file_path: join(mem, 'project_release.md'), content: LINKED })),
    textReply('Saved 1 memory.'),
  ]);
  server.route('dream', (r) => isDreamRequest(r.body), [
    // The Write tool edits only files read first.
    reply(
      toolUse('Read', { file_path: join(mem, 'feedback_pnpm.md') }),
      toolUse('Read', { file_path: join(mem, 'feedback_pnpm_again.md') }),
      toolUse('Read', { file_path: join(mem, 'MEMORY.md') }),
    ),
    reply(
      toolUse('Write', { file_path: join(mem, 'feedback_pnpm.md'), content: MERGED }),
      toolUse('Write', { file_path: join(mem, 'feedback_pnpm_again.md'), content: '' }),
    ),
    reply(toolUse('Write', { file_path: join(mem, 'MEMORY.md'), content: NEW_INDEX })),
    textReply('Merged the two pnpm memories.'),
  ]);
  server.route('parent', () => true, [textReply('Noted.')], { sticky: true });
  const leaf = await fg.turn('We keep a release checklist; remember it.');
  const producer = new JobProducer(service.engine);
  const extract = await producer.enqueue('extract', fg.extractPayload(leaf));
  const extracted = await waitForFinishedJob(producer.queue('extract'), extract.jobId);
  expect(extracted.failedReason).toBeFalsy();
  const dream = await producer.enqueue('dream', {
    projectDir: sanitizePath(fg.cwd),
    transcriptDir: sanitizePath(fg.cwd),
    sessionIds: [],
    force: true,
    requestedAt: new Date().toISOString(),
  });
  const dreamed = await waitForFinishedJob(producer.queue('dream'), dream.jobId, 30_000);
  expect(dreamed.failedReason).toBeFalsy();
  await producer.close();

  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await service?.stop('test');
  await server?.close();
});

describe('the memory browser in headless Chromium', () => {
  it('shows the index with its cap, each memory with type, age and links, receipts and the snapshot diff', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const denied = await page.goto(`${url}/memories`);
    expect(denied?.status()).toBe(401);

    await page.goto(`${url}/memories?token=${TOKEN}`);
    const project = sanitizePath(fg.cwd);
    await page.getByRole('link', { name: project }).click();
    await page.waitForSelector('#history');

    const index = page.locator('#index');
    await expect
      .poll(() => index.locator('p').first().textContent())
      .toMatch(/Within its cap: 4 of 200 lines/);
    expect(await index.locator('pre').textContent()).toContain('- [Release checklist](project_release.md)');

    const rows = page.locator('#memories tr.memory');
    expect(await rows.count()).toBe(4);
    const release = page.locator('#memories tr.memory[data-file="project_release.md"]');
    expect(await release.locator('td.type').textContent()).toBe('project');
    expect(await release.textContent()).toContain('Steps before a release, see the deploy freeze');
    expect(await release.textContent()).toContain('today');
    expect(await release.locator('code').allTextContents()).toEqual(['[[project_deploy]]', '[[user_role]]']);

    const receipts = await page.locator('#receipts tr.receipt').allTextContents();
    expect(
      receipts.some(
        (r) =>
          r.includes('extract') &&
          r.includes(fg.sessionId) &&
          r.includes('saved project_release.md (created)'),
      ),
    ).toBe(true);
    expect(
      receipts.some(
        (r) => r.includes('dream') && r.includes('consolidated: 0 created, 1 updated, 1 deleted'),
      ),
    ).toBe(true);

    const snapshot = page.locator('#history .snapshot').first();
    expect(await snapshot.locator('h3').textContent()).toMatch(/before dream \(job \d+\) \(6 files\)/);
    const diff = await snapshot.locator('.file-diff').allTextContents();
    expect(diff.some((d) => d.startsWith('feedback_pnpm_again.md (removed)'))).toBe(true);
    expect(
      diff.some((d) => d.startsWith('feedback_pnpm.md (changed)') && d.includes('+ Always pnpm, never npm.')),
    ).toBe(true);
    expect(await snapshot.locator('.add').count()).toBeGreaterThan(0);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'memory-browser.png'), fullPage: true });
    expect(existsSync(join(ARTIFACTS, 'memory-browser.png'))).toBe(true);
    await context.close();
  });

  it('restores a snapshot only through the guarded page form; a bare POST is refused', async () => {
    const project = sanitizePath(fg.cwd);
    const snapshots = (await import('@engram/memory-core/dream/snapshot')).listSnapshots;
    const [first] = await snapshots(fg.paths.memoryDir);
    const action = `${url}/memories/p/${project}/restore/${first!.id}`;
    // No credentials: the dashboard's guard. Credentials but no form token (a cross-site form): refused.
    expect((await fetch(action, { method: 'POST' })).status).toBe(401);
    const bare = await fetch(`${action}?token=${TOKEN}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'form_token=forged',
    });
    expect(bare.status).toBe(403);
    expect(existsSync(join(fg.paths.memoryDir, 'feedback_pnpm_again.md'))).toBe(false);

    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${url}/memories/p/${project}?token=${TOKEN}`);
    await page.locator(`#history .snapshot[data-id="${first!.id}"] button`).click();
    await page.waitForSelector('text=Restored');
    expect(await page.locator('p.ok').textContent()).toMatch(
      /Restored 3 file\(s\) from \S+\. The previous state is snapshot /,
    );
    expect(readFileSync(join(fg.paths.memoryDir, 'feedback_pnpm_again.md'), 'utf8')).toContain(
      'pnpm, never npm.',
    );
    await context.close();
  });

  it('is read-only unless configured: no restore form, and a POST is forbidden', async () => {
    const config = testWorkersConfig({
      modelUrl: server.url,
      engramHome: fg.engramHome,
      queues: 'extract',
      env: { ENGRAM_DASHBOARD_TOKEN: TOKEN },
    });
    const app = createHttpApp({
      config,
      metrics: { registry: { contentType: 'text/plain', metrics: async () => '' } } as never,
      checkReady: async () => ({ ok: true, details: {} }),
      dashboardQueues: [],
      sampleQueueDepths: async () => {},
    });
    const project = sanitizePath(fg.cwd);
    const html = await (await app.request(`/memories/p/${project}?token=${TOKEN}`)).text();
    expect(html).toContain('<button disabled title="read-only">Restore</button>');
    expect(html).not.toContain('name="form_token"');
    const post = await app.request(`/memories/p/${project}/restore/x?token=${TOKEN}`, { method: 'POST' });
    expect(post.status).toBe(403);
  });
});
