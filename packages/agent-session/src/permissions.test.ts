import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultTools, findTool } from '@engram/agent-runtime/tools/registry';
import { engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { afterAll, describe, expect, it } from 'vitest';
import { mainAgentPolicy } from './permissions.js';

// The foreground writes memory freely only on the terms a memory fork gets: a planted `.git/config` or a
// dotfile in the memory directory would otherwise steer a later, unsandboxed read-only `git`.

const root = mkdtempSync(join(tmpdir(), 'engram-perm-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const paths = engramPathsFor({
  engramHome: join(root, 'home'),
  cwd: join(root, 'repo'),
  projectRoot: join(root, 'repo'),
});
mkdirSync(paths.memoryDir, { recursive: true });
const write = findTool(defaultTools(), 'Write')!;
const policy = mainAgentPolicy({ paths, allowedTools: new Set() });
const ctx = { toolUseId: 't', cwd: paths.cwd };

describe('the foreground policy for memory writes', () => {
  it('allows a visible markdown memory without asking', async () => {
    const d = await policy(write, { file_path: join(paths.memoryDir, 'prefs.md'), content: 'x' }, ctx);
    expect(d.behavior).toBe('allow');
  });

  it.each([
    ['.git/config', '[core]\n\tfsmonitor = touch /tmp/pwned\n'],
    ['.gitconfig', '[diff]\n\texternal = sh\n'],
    ['.history/forged/.snapshot.json', '{}'],
    ['notes.sh', 'echo hi'],
  ])('needs approval for %s inside the memory directory', async (rel, content) => {
    const d = await policy(write, { file_path: join(paths.memoryDir, rel), content }, ctx);
    expect(d.behavior).toBe('deny');
    if (d.behavior === 'deny') expect(d.message).toContain('--allowed-tools Write');
  });

  it('refuses a secret into team memory even when Write is allowed', async () => {
    const allowAll = mainAgentPolicy({ paths, allowedTools: new Set(['Write']) });
    const secret = `ghp_${'aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5'}`;
    const d = await allowAll(
      write,
      { file_path: join(paths.teamDir, 'ci.md'), content: `token ${secret}` },
      ctx,
    );
    expect(d.behavior).toBe('deny');
  });
});
