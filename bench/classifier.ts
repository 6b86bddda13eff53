// Bash classifier and Grep benchmark (issue 13).
//
// classifier: `isReadOnlyBashCommand` over the classifier corpus (attack lines + ordinary read-only lines),
//   per line, against the cheapest thing it gates: spawning `/bin/bash -c true` (what the Bash tool does for
//   every command). Samples alternate (one corpus pass, one spawn) so machine load hits both alike.
// grep: the Grep tool (`runGrep`, content mode, 2,000 files in a temp dir) against its floor: the same rg
//   search spawned directly (child_process.spawn, no shell) with the same arguments and all of its output
//   read, no parsing or formatting. Alternating samples. Also files_with_matches, the default mode.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BASH_ATTACKS, BASH_READ_ONLY } from '@engram/agent-runtime/tools/bash-corpus.test-helpers';
import { isReadOnlyBashCommand } from '@engram/agent-runtime/tools/bash-readonly';
import { grepInputSchema, runGrep } from '@engram/agent-runtime/tools/grep';
import { locateRipgrep } from '@engram/agent-runtime/tools/ripgrep';
import { median, ms, percentile } from './lib/stats.js';

const SAMPLES = 200;
const lines = [...Object.values(BASH_ATTACKS).flat(), ...BASH_READ_ONLY];

/** The floor for Grep: spawn rg without a shell and read all of its output, as any non-blocking caller must. */
function rgOutput(rg: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(rg, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.on('error', reject);
    child.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

function now(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

// ---- classifier
for (const line of lines) isReadOnlyBashCommand(line); // warm-up
const perLine: number[] = [];
const spawnCost: number[] = [];
for (let i = 0; i < SAMPLES; i++) {
  let t = now();
  for (const line of lines) isReadOnlyBashCommand(line);
  perLine.push((now() - t) / lines.length);
  t = now();
  spawnSync('/bin/bash', ['-c', 'true']);
  spawnCost.push(now() - t);
}
const c50 = median(perLine);
const s50 = median(spawnCost);
console.log(
  `classifier: ${lines.length} lines, per line p50 ${ms(c50)} p99 ${ms(percentile(perLine, 99))} vs ` +
    `bash -c true p50 ${ms(s50)} → ratio ${(c50 / s50).toFixed(3)}× (target ≤0.1×) ${c50 / s50 <= 0.1 ? 'PASS' : 'MISS'}`,
);

// ---- grep
const dir = mkdtempSync(join(tmpdir(), 'engram-bench-grep-'));
try {
  for (let d = 0; d < 20; d++) {
    mkdirSync(join(dir, `pkg${d}`, 'src'), { recursive: true });
    for (let f = 0; f < 100; f++) {
      const body = Array.from({ length: 60 }, (_, l) =>
        l % 17 === 3 ? `// TODO(${d}.${f}) revisit line ${l}` : `export const value${l} = ${l * f};`,
      ).join('\n');
      writeFileSync(join(dir, `pkg${d}`, 'src', `file${f}.ts`), `${body}\n`);
    }
  }
  execFileSync('git', ['init', '-q', dir]);
  const rg = await locateRipgrep();
  const input = grepInputSchema.parse({ pattern: 'TODO\\(\\d+\\.\\d+\\)', output_mode: 'content', '-C': 1 });
  const ctx = { cwd: dir };
  const rawArgs = [
    '--no-config',
    '--hidden',
    '--null',
    '--with-filename',
    '--line-number',
    '--no-heading',
    '--color=never',
    '--sort=path',
    '--before-context=1',
    '--after-context=1',
    '--regexp=TODO\\(\\d+\\.\\d+\\)',
    '--',
    dir,
  ];
  await runGrep(input, ctx);
  const tool: number[] = [];
  const raw: number[] = [];
  const GREP_SAMPLES = 40;
  for (let i = 0; i < GREP_SAMPLES; i++) {
    let t = now();
    const out = await runGrep(input, ctx);
    tool.push(now() - t);
    if (!out.content.includes('TODO(0.0)')) throw new Error('grep bench: unexpected output');
    t = now();
    await rgOutput(rg, rawArgs);
    raw.push(now() - t);
  }
  const g50 = median(tool);
  const r50 = median(raw);
  console.log(
    `grep content: 2,000 files, ${(await runGrep(input, ctx)).content.split('\n').length} output lines, Grep p50 ${ms(g50)} ` +
      `p99 ${ms(percentile(tool, 99))} vs raw rg p50 ${ms(r50)} → ratio ${(g50 / r50).toFixed(2)}× ` +
      `(target ≤1.5×) ${g50 / r50 <= 1.5 ? 'PASS' : 'MISS'}`,
  );

  // files_with_matches (the default mode): the tool also stats every match to sort newest first.
  const filesInput = grepInputSchema.parse({ pattern: 'TODO\\(1\\.', output_mode: 'files_with_matches' });
  const filesArgs = [
    '--no-config',
    '--hidden',
    '--files-with-matches',
    '--null',
    '--regexp=TODO\\(1\\.',
    '--',
    dir,
  ];
  const ftool: number[] = [];
  const fraw: number[] = [];
  for (let i = 0; i < GREP_SAMPLES; i++) {
    let t = now();
    const out = await runGrep(filesInput, ctx);
    ftool.push(now() - t);
    if (!out.content.startsWith('Found 100 files'))
      throw new Error(`grep bench: unexpected ${out.content.slice(0, 40)}`);
    t = now();
    await rgOutput(rg, filesArgs);
    fraw.push(now() - t);
  }
  const f50 = median(ftool);
  const fr50 = median(fraw);
  console.log(
    `grep files_with_matches: 100 of 2,000 files, Grep p50 ${ms(f50)} p99 ${ms(percentile(ftool, 99))} vs raw rg ` +
      `p50 ${ms(fr50)} → ratio ${(f50 / fr50).toFixed(2)}× (target ≤1.5×) ${f50 / fr50 <= 1.5 ? 'PASS' : 'MISS'}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
