#!/usr/bin/env node
// The `engram` command npm links into node_modules/.bin. It is committed (not built) so the link exists right
// after `npm ci`, which links bins before anything is built; it runs the compiled CLI in ../dist, building the
// workspace first when that is missing (once, with a notice).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// `engram hook <event>` (Claude Code's hooks) goes to the lean hook entry: no commander, no command modules,
// and never a build (a hook must not stall Claude Code; without dist it says so and exits 0).
if (process.argv[2] === 'hook') {
  const hook = new URL('../dist/bin/engram-hook.js', import.meta.url);
  if (existsSync(fileURLToPath(hook))) {
    await import(hook.href);
  } else {
    process.stderr.write('engram hook: Engram is not built (run `npm run build`); nothing done.\n');
  }
} else {
  await main();
}

async function main() {
  const cli = new URL('../dist/bin/engram.js', import.meta.url);
  if (!existsSync(fileURLToPath(cli))) {
    const root = fileURLToPath(new URL('../../../', import.meta.url));
    process.stderr.write('engram: first run — building the workspace (`npm run build`, once)…\n');
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const built = spawnSync(npm, ['run', 'build', '--silent'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (built.status !== 0 || !existsSync(fileURLToPath(cli))) {
      process.stderr.write(
        `engram: the build failed; run \`npm run build\` in ${root} and fix what it reports.\n`,
      );
      process.exit(1);
    }
  }
  await import(cli.href);
}
