import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { globTool } from '@engram/agent-runtime/tools/glob';
import { grepTool } from '@engram/agent-runtime/tools/grep';
import { type AnyTool, ReadFileState, type ToolContext } from '@engram/agent-runtime/tools/tool';
import { afterAll, describe, expect, it } from 'vitest';
import { sandboxServedBash } from './served-policy.js';

const base = realpathSync(mkdtempSync(join(tmpdir(), 'served-policy-')));
const workspace = join(base, 'acme');
const home = join(base, 'home-acme');
const rival = join(base, 'rival');
for (const d of [workspace, home, rival]) mkdirSync(d);
writeFileSync(join(workspace, 'notes.md'), 'ACME-NOTES\n');
writeFileSync(join(rival, 'secret.md'), 'RIVAL-SECRET\n');
symlinkSync(rival, join(workspace, 'linked'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

async function servedTools(): Promise<Map<string, AnyTool>> {
  const { wrapTools } = await sandboxServedBash({
    tenant: { workspace, home },
    allowedTools: new Set(['Grep', 'Glob']),
    canUseTool: async () => ({ behavior: 'allow' }),
  });
  return new Map(wrapTools([grepTool as AnyTool, globTool as AnyTool]).map((t) => [t.name, t]));
}

const ctx: ToolContext = { cwd: workspace, readFileState: new ReadFileState(), toolUseId: 't' };

describe('served Grep and Glob', () => {
  it("search the tenant's workspace and refuse a root outside it even when the permission check allowed the call", async () => {
    const tools = await servedTools();
    const grep = tools.get('Grep')!;
    const glob = tools.get('Glob')!;
    expect(String((await grep.call({ pattern: 'ACME' }, ctx)).content)).toContain('notes.md');
    expect(String((await glob.call({ pattern: '**/*.md' }, ctx)).content)).toBe(join(workspace, 'notes.md'));
    // One call at a time: a rejection created before it is awaited would be reported as unhandled.
    for (const call of [
      () => grep.call({ pattern: 'SECRET', path: rival }, ctx),
      () => grep.call({ pattern: 'SECRET', path: 'linked' }, ctx),
      () => grep.call({ pattern: 'PATH=', path: '/proc/self/environ' }, ctx),
      () => glob.call({ pattern: '**', path: 'linked' }, ctx),
      () => glob.call({ pattern: `${rival}/*` }, ctx),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'outside_boundary' });
    }
  });
});
