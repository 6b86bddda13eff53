import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { prepareUnattended } from '@engram/agent-runtime/sandbox/unattended';
import { editTool } from '@engram/agent-runtime/tools/edit';
import { globTool } from '@engram/agent-runtime/tools/glob';
import { grepTool } from '@engram/agent-runtime/tools/grep';
import { type AnyTool, ReadFileState, type ToolContext, ToolError } from '@engram/agent-runtime/tools/tool';
import { writeTool } from '@engram/agent-runtime/tools/write';
import type { ServedTool } from '@engram/tenants/tenant-store';
import { startRaceLoop } from '@engram/testkit/race-loop';
import { afterAll, describe, expect, it } from 'vitest';
import { servedBoundary } from './served-policy.js';

const base = realpathSync(mkdtempSync(join(tmpdir(), 'served-policy-')));
const workspace = join(base, 'acme');
const home = join(base, 'home-acme');
const rival = join(base, 'rival');
for (const d of [workspace, home, rival]) mkdirSync(d);
writeFileSync(join(workspace, 'notes.md'), 'ACME-NOTES\n');
writeFileSync(join(rival, 'secret.md'), 'RIVAL-SECRET\n');
symlinkSync(rival, join(workspace, 'linked'));
afterAll(() => rmSync(base, { recursive: true, force: true, maxRetries: 5 }));

/**
 * `tools` as a served turn's loop runs them: each call with the turn's prepared boundary in its context
 * (`servedBoundary`, as turn-runner states it), whatever the permission policy allowed.
 */
async function servedAs(
  allowedTools: ReadonlySet<ServedTool>,
  memoryDir: string,
  tools: AnyTool[],
): Promise<Map<string, AnyTool>> {
  const boundary = await prepareUnattended(
    await servedBoundary({ tenant: { workspace, home }, allowedTools, memoryDir }),
  );
  return new Map(
    tools.map((t) => [t.name, { ...t, call: (input, c: ToolContext) => t.call(input, { ...c, boundary }) }]),
  );
}

async function servedTools(): Promise<Map<string, AnyTool>> {
  return servedAs(new Set(['Grep', 'Glob']), join(home, 'memory'), [
    grepTool as AnyTool,
    globTool as AnyTool,
  ]);
}

const ctx: ToolContext = {
  cwd: workspace,
  readFileState: new ReadFileState(),
  toolUseId: 't',
  boundary: ATTENDED,
};

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
      await expect(call()).rejects.toMatchObject({ code: 'OUTSIDE_BOUNDARY' });
    }
  });
});

const isLink = (path: string) => {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
};

/** Every file below `dir`, relative, sorted. */
const listing = (dir: string) => readdirSync(dir, { recursive: true }).map(String).sort();

describe('served Write and Edit through the jailed writer', () => {
  async function writeTools(memoryDir: string): Promise<Map<string, AnyTool>> {
    return servedAs(new Set(['Write', 'Edit']), memoryDir, [writeTool as AnyTool, editTool as AnyTool]);
  }

  it('land in the workspace and the memory directory, and nowhere else even when the policy allowed the call', async () => {
    const memoryDir = join(home, 'memory');
    const tools = await writeTools(memoryDir);
    const write = tools.get('Write')!;
    const c = () => ({ ...ctx, readFileState: new ReadFileState() });
    await write.call({ file_path: join(workspace, 'new', 'a.md'), content: 'A\n' }, c());
    expect(readFileSync(join(workspace, 'new', 'a.md'), 'utf8')).toBe('A\n');
    await write.call({ file_path: join(memoryDir, 'm.md'), content: 'M\n' }, c());
    expect(readFileSync(join(memoryDir, 'm.md'), 'utf8')).toBe('M\n');
    for (const file_path of [join(rival, 'x.md'), join(workspace, 'linked', 'x.md'), join(base, 'x.md')]) {
      await expect(write.call({ file_path, content: 'pwned' }, c())).rejects.toBeInstanceOf(ToolError);
    }
    expect(listing(rival)).toEqual(['secret.md']);
  });

  // A tenant with Bash+Write flips a directory of its workspace between a real directory and a link to
  // another tenant's project (another process, as fast as it can), while its turn writes and edits a file
  // below that directory: the policy's path check passed long before the write, only the jail decides.
  for (const tool of ['Write', 'Edit'] as const) {
    it(`${tool}: 0 files land in another tenant's project in 1,000 attempts while a directory symlink flips; writes inside land`, async () => {
      const flipDir = join(workspace, `flip-${tool}`);
      const victim = join(base, `victim-${tool}`);
      mkdirSync(victim);
      writeFileSync(join(victim, 'CLAUDE.md'), 'VICTIM\n');
      mkdirSync(flipDir);
      writeFileSync(join(flipDir, 'CLAUDE.md'), 'OWN\n');
      const tools = await writeTools(join(home, 'memory'));
      // `rm -rf` first: a write may have created the directory again in the gap. Its own process group, so
      // stopping it also ends the rm/ln/mkdir it is running at that moment.
      const flipper = startRaceLoop(
        `cd '${workspace}'; while :; do rm -rf flip-${tool}; ln -s '${victim}' flip-${tool}; ` +
          `rm -f flip-${tool}; mkdir flip-${tool} && echo OWN > flip-${tool}/CLAUDE.md; done 2>/dev/null`,
      );
      let landed = 0;
      let refused = 0;
      try {
        // The race starts once the flipper runs (spawning bash can take a while on a loaded machine).
        const started = Date.now();
        while (!isLink(flipDir) && Date.now() - started < 15_000) await new Promise((r) => setTimeout(r, 5));
        const file_path = join(flipDir, 'CLAUDE.md');
        // At least 1,000 attempts, and on until the race has gone both ways (bounded).
        for (let i = 0; i < 1000 || ((landed === 0 || refused === 0) && i < 20_000); i++) {
          const c = { ...ctx, readFileState: new ReadFileState() };
          // The model "has read" the file: only the jail (and the read boundary before it) decides.
          c.readFileState.set(file_path, { mtimeMs: Number.MAX_SAFE_INTEGER });
          const input =
            tool === 'Write'
              ? { file_path, content: `pwned ${i}\n` }
              : { file_path, old_string: 'OWN', new_string: 'OWN', replace_all: false };
          if (tool === 'Edit') input.new_string = `OWN ${i}`;
          try {
            await tools.get(tool)!.call(tool === 'Edit' ? editTool.inputSchema.parse(input) : input, c);
            // (No reset by path here: the test's own write would follow the flipping link. `OWN` stays in the
            // file after each edit, and the flipper recreates the directory with a fresh file anyway.)
            landed++;
          } catch (e) {
            if (!(e instanceof ToolError) && !(e as NodeJS.ErrnoException).code) throw e;
            refused++;
          }
        }
      } finally {
        await flipper.stop();
      }
      expect(readFileSync(join(victim, 'CLAUDE.md'), 'utf8')).toBe('VICTIM\n');
      expect(listing(victim)).toEqual(['CLAUDE.md']);
      // Positive control: the race ran both ways — writes inside the workspace landed, others were refused.
      expect(landed).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
    }, 180_000);
  }
});
