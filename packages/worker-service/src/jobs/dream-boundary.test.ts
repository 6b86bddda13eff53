import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { DreamResult } from '@engram/queue/jobs/dream';
import { JobProducer } from '@engram/queue/producer';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';
import { createForeground } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';
import { isDreamRequest } from './dream.test-helpers.js';

// A tenant's consolidation with no session to fork from runs from a minimal context (the pipeline's second
// fork path). Its tools are bounded to the tenant's world exactly as on the session path: a Read of another
// tenant's memory and a Grep of the worker's own environment are refused, while the same calls on the
// tenant's own memory work (the positive control). Real Redis, real BullMQ, the scripted model obeying the
// "prompt" that asks for the other tenant's files.

const scripted = useModelServer();
const { closer } = scripted;

const MEMORY = (name: string, body: string) =>
  `---\nname: ${name}\ndescription: ${name}\ntype: project\n---\n${body}\n`;

/** The tool results the fork's second request carried back, in call order. */
function toolResults(request: RecordedRequest): Array<{ text: string; isError: boolean }> {
  const last = request.body.messages.at(-1) as { content: Array<Record<string, unknown>> };
  return last.content
    .filter((b) => b.type === 'tool_result')
    .map((b) => ({
      text: typeof b.content === 'string' ? b.content : JSON.stringify(b.content),
      isError: b.is_error === true,
    }));
}

describe('a tenant consolidation from a minimal context', () => {
  it('reads only the tenant’s own world: another tenant’s memory and /proc are refused, its own memory is read', async () => {
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-dream-boundary-'));
    const cwd = mkdtempSync(join(tmpdir(), 'engram-dream-boundary-project-'));
    const acme = createForeground(scripted.server, { engramHome: tenantHomeDir(engramHome, 'acme'), cwd });
    const rival = createForeground(scripted.server, { engramHome: tenantHomeDir(engramHome, 'rival'), cwd });
    mkdirSync(acme.paths.memoryDir, { recursive: true });
    mkdirSync(rival.paths.memoryDir, { recursive: true });
    writeFileSync(join(acme.paths.memoryDir, 'project_own.md'), MEMORY('own', 'OWN-FACT-7731'));
    writeFileSync(join(acme.paths.memoryDir, 'MEMORY.md'), '- [own](project_own.md) — own fact\n');
    writeFileSync(join(rival.paths.memoryDir, 'project_secret.md'), MEMORY('secret', 'RIVAL-SECRET-4410'));

    scripted.server.route('dream', (r) => isDreamRequest(r.body), [
      reply(
        toolUse('Read', { file_path: join(rival.paths.memoryDir, 'project_secret.md') }),
        toolUse('Grep', { pattern: 'PATH=', path: '/proc/self/environ', output_mode: 'files_with_matches' }),
        toolUse('Read', { file_path: join(acme.paths.memoryDir, 'project_own.md') }),
      ),
      textReply('Nothing to consolidate.'),
    ]);

    const service = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome,
      queues: 'dream',
      closer,
    });
    const producer = closer.add(new JobProducer(service.engine));
    const receipt = await producer.enqueue('dream', {
      projectDir: sanitizePath(cwd),
      transcriptDir: sanitizePath(cwd),
      sessionIds: [],
      force: true,
      tenant: 'acme',
      requestedAt: new Date().toISOString(),
    });
    const job = await waitForFinishedJob(producer.queue('dream'), receipt.jobId, 20_000);
    expect(job.failedReason).toBeUndefined();
    expect((job.returnvalue as DreamResult).forkedFrom).toBe('minimal');

    const dreamRequests = scripted.server.requests.filter((r) => isDreamRequest(r.body));
    expect(dreamRequests.length).toBe(2);
    const [rivalRead, environGrep, ownRead] = toolResults(dreamRequests[1]!);
    expect(rivalRead!.isError).toBe(true);
    expect(rivalRead!.text).not.toContain('RIVAL-SECRET-4410');
    expect(environGrep!.isError).toBe(true);
    expect(environGrep!.text).not.toContain('environ\n');
    // Positive control: the same tool, on the tenant's own memory, in the same fork.
    expect(ownRead!.isError).toBe(false);
    expect(ownRead!.text).toContain('OWN-FACT-7731');
  }, 60_000);
});
