#!/usr/bin/env node
// The second half of `npm test`'s pre-step (after ensure-installed.mjs): the system programs the suites run
// for real. When any is missing it stops at once with ONE message naming every missing program and the
// command that installs them all, instead of six workspaces failing later with unrelated errors. Node's
// standard library only (it runs before anything else can be relied on).
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function onPath(name, env) {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {}
  }
  return undefined;
}

/** Names Chromium is installed under (Debian `chromium`, Ubuntu `chromium-browser`, Google's builds). */
export const CHROMIUM_NAMES = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'];

/** CHROMIUM_PATH, else the first of CHROMIUM_NAMES on PATH. */
export function findChromium(env = process.env) {
  if (env.CHROMIUM_PATH) return existsSync(env.CHROMIUM_PATH) ? env.CHROMIUM_PATH : undefined;
  for (const name of CHROMIUM_NAMES) {
    const found = onPath(name, env);
    if (found) return found;
  }
  return undefined;
}

/** Does ripgrep come with the install (@vscode/ripgrep's platform binary), or from PATH? */
function hasRipgrep(env, dir) {
  const bundled = join(
    dir,
    'node_modules',
    '@vscode',
    `ripgrep-${process.platform}-${process.arch}`,
    'bin',
    'rg',
  );
  return existsSync(bundled) || !!onPath('rg', env);
}

/** Each missing program: what it is for and the Debian/Ubuntu package that provides it. */
export function missingTestTools(env = process.env, dir = root) {
  const missing = [];
  // REDIS_URL points the suites at a Redis of the caller's; the tests that start their own still need the binary.
  if (!onPath('redis-server', env))
    missing.push({ tool: 'redis-server', why: 'the integration tests’ Redis', pkg: 'redis-server' });
  if (!onPath('redis-cli', env))
    missing.push({ tool: 'redis-cli', why: 'the Redis Cluster and TLS topology tests', pkg: 'redis-tools' });
  if (!onPath('openssl', env))
    missing.push({ tool: 'openssl', why: 'the Redis TLS topology test’s certificates', pkg: 'openssl' });
  if (!onPath('bwrap', env))
    missing.push({ tool: 'bwrap', why: 'the OS sandbox tests of memory forks’ Bash', pkg: 'bubblewrap' });
  if (!findChromium(env))
    missing.push({
      tool: env.CHROMIUM_PATH ? `Chromium at CHROMIUM_PATH=${env.CHROMIUM_PATH}` : 'Chromium',
      why: `the memory browser tests (looked for CHROMIUM_PATH, then ${CHROMIUM_NAMES.join('/')} on PATH)`,
      pkg: 'chromium',
    });
  if (!hasRipgrep(env, dir)) missing.push({ tool: 'rg', why: 'the Grep tool’s tests', pkg: 'ripgrep' });
  return missing;
}

export function missingToolsMessage(missing) {
  const lines = missing.map((m) => `  - ${m.tool}: ${m.why}`);
  const pkgs = [...new Set(missing.map((m) => m.pkg))].join(' ');
  return [
    `engram: npm test needs ${missing.length === 1 ? 'a program' : 'programs'} this machine lacks:`,
    ...lines,
    `Install ${missing.length === 1 ? 'it' : 'them'} (Debian/Ubuntu, as root): apt-get install -y ${pkgs}`,
    '(or put them on PATH; Chromium may also be named by CHROMIUM_PATH).',
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const missing = missingTestTools();
  if (missing.length) {
    process.stderr.write(`${missingToolsMessage(missing)}\n`);
    process.exit(1);
  }
}
