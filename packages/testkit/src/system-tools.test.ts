import { spawnSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm test`'s pre-step scripts/check-test-tools.mjs, run as npm runs it, with system programs hidden from
// PATH: it stops with one message naming every missing program and the one apt-get line that installs them.
// The positive control is this machine's own PATH, where the suites run: nothing is missing, no output.

const SCRIPT = fileURLToPath(new URL('../../../scripts/check-test-tools.mjs', import.meta.url));

/** A PATH of one directory holding `node` and the named programs (links to this machine's). */
function pathWith(programs: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'engram-tools-path-'));
  symlinkSync(process.execPath, join(dir, 'node'));
  for (const name of programs) {
    const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();
    if (!found) throw new Error(`this machine has no ${name}; the test links the real one`);
    symlinkSync(found, join(dir, name));
  }
  return dir;
}

function check(env: NodeJS.ProcessEnv) {
  const { CHROMIUM_PATH: _unset, ...rest } = process.env;
  return spawnSync(process.execPath, [SCRIPT], { env: { ...rest, ...env }, encoding: 'utf8' });
}

describe('npm test pre-step: system programs', () => {
  it('names every missing program once, with one install command, when all are hidden from PATH', () => {
    const run = check({ PATH: pathWith([]) });
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    for (const tool of ['redis-server', 'redis-cli', 'openssl', 'bwrap', 'Chromium'])
      expect(run.stderr.split('\n').filter((l) => l.startsWith(`  - ${tool}:`))).toHaveLength(1);
    const install = run.stderr.split('\n').filter((l) => l.includes('apt-get install -y'));
    expect(install).toEqual([
      'Install them (Debian/Ubuntu, as root): apt-get install -y redis-server redis-tools openssl bubblewrap chromium',
    ]);
    // ripgrep comes with npm ci (@vscode/ripgrep's platform binary), so it is not asked for here.
    expect(run.stderr).not.toContain('  - rg:');
  });

  it('names only what is missing: Chromium hidden, the rest on PATH; CHROMIUM_PATH is honoured', () => {
    const path = pathWith(['redis-server', 'redis-cli', 'openssl', 'bwrap']);
    const run = check({ PATH: path });
    expect(run.status).toBe(1);
    expect(run.stderr.split('\n').filter((l) => l.startsWith('  - '))).toEqual([
      expect.stringMatching(/^ {2}- Chromium: the memory browser tests/),
    ]);
    expect(run.stderr).toContain('apt-get install -y chromium\n');
    const chromium = spawnSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], {
      encoding: 'utf8',
    }).stdout.trim();
    expect(check({ PATH: path, CHROMIUM_PATH: chromium }).status).toBe(0);
  });

  it('passes silently on the PATH the suites run with', () => {
    const run = check({});
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});
