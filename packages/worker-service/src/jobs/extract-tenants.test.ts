import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { JobProducer } from '@engram/queue/producer';
import { SessionState } from '@engram/queue/state/session-state';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createForeground, isExtractionRequest, lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';

// Two hosted tenants whose sessions look identical to the queue: the same session id, in a project at the
// same path string. Their extractions must neither coalesce into one job nor share a cursor: each tenant's
// job runs, in its own area, from its own cursor (real Redis, real BullMQ, the scripted model).

let server: ModelServer;
const closer = new Closer();
beforeAll(async () => {
  server = await startModelServer();
});
afterEach(async () => {
  await closer.closeAll();
  server.reset();
});
afterAll(() => server.close());

const memory = (name: string, body: string) =>
  `---\nname: ${name}\ndescription: ${name} for this repository\ntype: project\n---\n${body}\n`;

describe('extraction for two tenants with one session id and one project path', () => {
  it('runs each tenant’s job in its own area from its own cursor', async () => {
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-tenants-extract-'));
    const cwd = mkdtempSync(join(tmpdir(), 'engram-same-project-'));
    const sessionId = 'same-session';
    const fg = {
      acme: createForeground(server, { engramHome: tenantHomeDir(engramHome, 'acme'), cwd, sessionId }),
      rival: createForeground(server, { engramHome: tenantHomeDir(engramHome, 'rival'), cwd, sessionId }),
    };
    server.route(
      'parent',
      (r) => !isExtractionRequest(r.body),
      (): ScriptStep => textReply('Noted.'),
    );
    server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (r): ScriptStep => {
        const instruction = lastUserText(r.body);
        if (!instruction.includes('You are now the memory extraction subagent')) return textReply('Saved.');
        const memoryDir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
        const said = JSON.stringify(r.body.messages);
        const [file, content] = said.includes('blue/green')
          ? ['project_deploys.md', memory('Deploys', 'Deploys use the blue/green script.')]
          : ['project_ports.md', memory('Ports', 'Staging API: 7443.')];
        return reply(text('Saving.'), toolUse('Write', { file_path: `${memoryDir}/${file}`, content }));
      },
    );
    const namespace = uniquePrefix('tenantx');
    const service = await startTestWorkerService({
      modelUrl: server.url,
      engramHome,
      namespace,
      queues: 'extract',
      closer,
    });
    const producer = closer.add(new JobProducer(service.engine));

    // Acme's session is further along (three turns) than rival's (one), so a shared cursor would make
    // rival's extraction "stale" — and a shared deduplication id would fold rival's job into acme's.
    await fg.acme.turn('hello');
    await fg.acme.turn('still here');
    const acmeLeaf = await fg.acme.turn('Deploys go through the blue/green script, remember that.');
    const rivalLeaf = await fg.rival.turn('Staging API listens on 7443, remember that.');
    expect(acmeLeaf.leafSeq).toBeGreaterThan(rivalLeaf.leafSeq);
    const [a, b] = await Promise.all([
      producer.enqueue('extract', { ...fg.acme.extractPayload(acmeLeaf), tenant: 'acme' }),
      producer.enqueue('extract', { ...fg.rival.extractPayload(rivalLeaf), tenant: 'rival' }),
    ]);
    expect(a.jobId).not.toBe(b.jobId);
    const [ja, jb] = await Promise.all([
      waitForFinishedJob(producer.queue('extract'), a.jobId, 60_000),
      waitForFinishedJob(producer.queue('extract'), b.jobId, 60_000),
    ]);
    expect(ja.failedReason).toBeUndefined();
    expect(jb.failedReason).toBeUndefined();
    expect(ja.returnvalue as ExtractResult).toMatchObject({ outcome: 'extracted', toSeq: acmeLeaf.leafSeq });
    expect(jb.returnvalue as ExtractResult).toMatchObject({
      outcome: 'extracted',
      fromSeq: 0,
      toSeq: rivalLeaf.leafSeq,
    });
    // Each memory in its own tenant's area, and only there.
    expect(readFileSync(join(fg.acme.paths.memoryDir, 'project_deploys.md'), 'utf8')).toContain('blue/green');
    expect(readFileSync(join(fg.rival.paths.memoryDir, 'project_ports.md'), 'utf8')).toContain('7443');
    expect(existsSync(join(fg.acme.paths.memoryDir, 'project_ports.md'))).toBe(false);
    expect(existsSync(join(fg.rival.paths.memoryDir, 'project_deploys.md'))).toBe(false);
    // Each tenant's cursor and receipts, under its own keys.
    const state = (tenant: string) =>
      new SessionState(service.engine.state, { tenant, transcriptDir: sanitizePath(cwd), sessionId });
    expect(await state('acme').extractCursor()).toEqual({
      leafUuid: acmeLeaf.leafUuid,
      leafSeq: acmeLeaf.leafSeq,
    });
    expect(await state('rival').extractCursor()).toEqual({
      leafUuid: rivalLeaf.leafUuid,
      leafSeq: rivalLeaf.leafSeq,
    });
    expect((await state('rival').extractReceipts()).flatMap((r) => r.memories.map((m) => m.path))).toEqual([
      'project_ports.md',
    ]);
    // The operator (no tenant) has no state for this session at all.
    expect(
      await new SessionState(service.engine.state, {
        transcriptDir: sanitizePath(cwd),
        sessionId,
      }).extractCursor(),
    ).toBeUndefined();
  });
});
