#!/usr/bin/env node
// The `engram` command npm links into node_modules/.bin. It is committed (not built) so the link exists right
// after `npm ci`, which links bins before anything is built; it runs the compiled CLI in ../dist, building the
// workspace first when that is missing (once, with a notice).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
