import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { scopeSpanProcessor, withScope } from '@engram/telemetry/scope';
import { inSpan } from '@engram/telemetry/spans';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterAll, describe, expect, it } from 'vitest';
import { useModelTestbed } from '../fixtures.test-helpers.js';
import { ATTENDED } from '../sandbox/boundary.js';
import { defaultTools } from '../tools/registry.js';
import type { CanUseTool } from '../tools/tool.js';
import { createUserEntry } from '../transcript/entry.js';
import { runQueryLoop } from './query-loop.js';

// Tool calls as spans: the real tracer SDK (registered for this test file's process) with its in-memory
// exporter and Engram's job-scope processor, a real query loop against the scripted model over HTTP.

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({
  spanProcessors: [scopeSpanProcessor(), new SimpleSpanProcessor(exporter)],
});
provider.register();
afterAll(() => provider.shutdown());

const bed = useModelTestbed();

describe('runQueryLoop: execute_tool spans', () => {
  it('one gen_ai execute_tool span per call, under the caller’s span with the job scope; a refused call is an error span', async () => {
    await writeFile(join(bed.dir, 'notes.txt'), 'remember the milk\n');
    bed.server.script(
      reply(
        text('Reading, then writing.'),
        toolUse('Read', { file_path: join(bed.dir, 'notes.txt') }, 'toolu_read1'),
        toolUse('Write', { file_path: join(bed.dir, 'out.txt'), content: 'x' }, 'toolu_write1'),
        toolUse(`Nope${'x'.repeat(200)}`, {}, 'toolu_nope1'),
      ),
      textReply('Done.'),
    );
    const refuseWrites: CanUseTool = async (tool) =>
      tool.name === 'Write'
        ? { behavior: 'deny', message: 'Writes are not allowed here.', reason: 'test_policy' }
        : { behavior: 'allow' };
    const first = createUserEntry(
      { sessionId: 's1', cwd: bed.dir, parentUuid: null },
      'Read notes, write out.',
    );
    const result = await withScope({ tenant: 'acme', project: '-work-p' }, () =>
      inSpan('engram.fork extract', {}, () =>
        runQueryLoop({
          client: bed.client,
          model: 'claude-sonnet-5-5',
          system: [{ type: 'text', text: 'You are a careful coding agent.' }],
          tools: defaultTools(),
          maxTokens: 4_096,
          messages: [first],
          canUseTool: refuseWrites,
          cwd: bed.dir,
          sessionId: 's1',
          boundary: ATTENDED,
        }),
      ),
    );
    expect(result.endReason).toBe('completed');

    const spans = exporter.getFinishedSpans();
    const fork = spans.find((s) => s.name === 'engram.fork extract')!;
    const read = spans.find((s) => s.name === 'execute_tool Read');
    const write = spans.find((s) => s.name === 'execute_tool Write');
    expect(spans.map((s) => s.name)).toEqual(
      expect.arrayContaining(['execute_tool Read', 'execute_tool Write', 'engram.fork extract']),
    );
    for (const [span, id] of [
      [read!, 'toolu_read1'],
      [write!, 'toolu_write1'],
    ] as const) {
      expect(span.parentSpanContext?.spanId).toBe(fork.spanContext().spanId);
      expect(span.spanContext().traceId).toBe(fork.spanContext().traceId);
      expect(span.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': span.name.slice('execute_tool '.length),
        'gen_ai.tool.call.id': id,
        'gen_ai.tool.type': 'function',
        'engram.tenant': 'acme',
        'engram.project': '-work-p',
      });
    }
    // The allowed Read: no error. The refused Write: an error span; the model still got its tool_result.
    expect(read!.status.code).toBe(0);
    expect(read!.attributes['error.type']).toBeUndefined();
    expect(write!.status.code).toBe(2);
    expect(write!.attributes['error.type']).toBe('permission_denied');
    // A tool the loop does not have: no span name from the model's text, a bounded attribute, a tool error.
    const unknown = spans.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_nope1');
    expect(unknown).toMatchObject({ name: 'execute_tool', attributes: { 'error.type': 'tool_error' } });
    expect(unknown!.attributes['gen_ai.tool.name']).toBe(`Nope${'x'.repeat(60)}`);
    expect(unknown!.parentSpanContext?.spanId).toBe(fork.spanContext().spanId);
    expect(JSON.stringify(bed.server.messageRequests().at(-1)!.body.messages)).toContain(
      'Writes are not allowed here.',
    );
  });
});
