import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { installHooks, uninstallHooks } from '@engram/memory-core/hooks/claude-code-settings';
import { claudeHome } from './hook.js';
import { EXIT, type Output } from './output.js';

// `engram setup claude-code [--uninstall]`: Engram's hooks written into Claude Code's user settings, for people
// who do not use the plugin. The file is replaced atomically and only when something changes.

export async function setupClaudeCodeCommand(
  opts: { uninstall: boolean; env?: NodeJS.ProcessEnv },
  io: Output,
): Promise<number> {
  const path = join(claudeHome(opts.env), 'settings.json');
  const before = await fs.readFile(path, 'utf8').catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return '';
    throw e;
  });
  let change: ReturnType<typeof installHooks>;
  try {
    change = opts.uninstall ? uninstallHooks(before) : installHooks(before);
  } catch (error) {
    io.err(`engram setup claude-code: ${path}: ${(error as Error).message}`);
    return EXIT.usage;
  }
  if (!change.changed) {
    io.out(opts.uninstall ? `No Engram hooks in ${path}.` : `Engram's hooks are already in ${path}.`);
    return EXIT.ok;
  }
  await writeFileAtomic(path, change.text);
  io.out(`${opts.uninstall ? 'Removed' : 'Added'} ${change.events.join(', ')} in ${path}.`);
  if (!opts.uninstall)
    io.out('Run workers with ENGRAM_HOME set to the same directory (engram workers, or engram dev).');
  return EXIT.ok;
}
