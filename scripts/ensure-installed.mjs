#!/usr/bin/env node
// npm's pre-step for `npm run dev` and `npm test` (predev / pretest): on a fresh clone, or when
// package-lock.json changed since the last install, run `npm ci` first and say so in one line. It uses
// nothing but Node's standard library, because on a fresh clone nothing else is installed yet.
//
// "Installed" means npm's own record of the tree (node_modules/.package-lock.json, written by every
// install) holds every package of package-lock.json at the same version, except optional packages npm
// skipped for this platform. On an installed tree this costs one read of two JSON files.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Why the tree needs an install, or undefined when it is up to date. */
export function staleReason(dir = root) {
  const lock = readJson(join(dir, 'package-lock.json'));
  if (!lock?.packages) return undefined; // no lockfile: nothing to compare against (npm reports that itself)
  const installed = readJson(join(dir, 'node_modules', '.package-lock.json'));
  if (!installed?.packages) return 'node_modules is missing';
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (key === '') continue;
    const have = installed.packages[key];
    if (!have) {
      if (entry.optional || entry.devOptional) continue; // skipped for this platform
      return `${key.replace(/^node_modules\//, '')} is not installed`;
    }
    if ((entry.version ?? entry.resolved) !== (have.version ?? have.resolved))
      return `${key.replace(/^node_modules\//, '')} is ${have.version} but package-lock.json wants ${entry.version}`;
  }
  return undefined;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const reason = staleReason();
  if (reason) {
    process.stderr.write(`engram: ${reason} — running \`npm ci\` first (once; about a minute).\n`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (result.status !== 0) {
      process.stderr.write(
        `engram: \`npm ci\` failed (exit ${result.status ?? result.signal}); fix the error above and run it again.\n`,
      );
      process.exit(result.status || 1);
    }
  }
}
