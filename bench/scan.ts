// Scan benchmark. scanMemoryDir over 200 memory files (Claude Code's current frontmatter: name, quoted
// description, metadata with node_type/type/originSessionId/modified; ~3 KB body, in a temp dir) against the
// floor: a raw synchronous read of the first 4 KiB of each of the same files (open, read, close — no
// directory walk, no stat, no parsing), measured in the same run. A second case: a 10,000-file memory
// directory, where the scan reads only the newest 200, against a readdir + stat of every file (the least any
// scan must do to know which 200 are newest).
//
// Each sample times the baseline and the scan back to back and keeps their ratio, so load from other
// processes on the machine hits both sides of a sample alike; the median ratio over all samples is reported.
// A second, informational baseline is printed for the uncached mode: the I/O floor, i.e. the system calls any
// uncached scan must make whatever its parser costs — a readdir (with types) of the directory tree, then open,
// fstat (the mtime a scan sorts by), read 4 KiB and close per file. The target stays against raw head reads.
// Two scan modes are measured:
//   - uncached: `cache: false`, every head is opened, read and parsed (the first scan in a process);
//   - cached:   the default; files unchanged since the previous scan cost one stat each (every later scan).
import { randomUUID } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { median, ms } from './lib/stats.js';

const FILES = 200;
const REPETITIONS = 7;
const SAMPLES_PER_REPETITION = 40;
const TYPES = ['user', 'feedback', 'project', 'reference'] as const;

function buildDir(count = FILES): { dir: string; files: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-scan-'));
  const files: string[] = [];
  const paragraph =
    'The team agreed to keep integration tests against a real database after a mocked test passed while ' +
    'the production migration failed. Apply this to every new data-access change.\n';
  let body = '';
  while (body.length < 3000) body += paragraph;
  for (let i = 0; i < count; i++) {
    const sub = i % 4 === 0 ? join(dir, 'topics') : dir;
    mkdirSync(sub, { recursive: true });
    const t = Date.now() / 1000 - i * 3600;
    const frontmatter = [
      '---',
      `name: memory-number-${i}`,
      `description: "A specific one-line description of memory ${i}, used for recall"`,
      'metadata:',
      '  node_type: memory',
      `  type: ${TYPES[i % 4]}`,
      `  originSessionId: ${randomUUID()}`,
      `  modified: ${new Date(t * 1000).toISOString()}`,
      '---',
      '',
    ].join('\n');
    const file = join(sub, `memory-${i}.md`);
    writeFileSync(file, frontmatter + body);
    utimesSync(file, t, t);
    files.push(file);
  }
  writeFileSync(join(dir, 'MEMORY.md'), '- [Memory number 0](memory-0.md) — hook\n');
  return { dir, files };
}

/** readdir (with types) of the directory tree, `onFile` for every non-directory entry. */
function walkTree(dir: string, onFile: (path: string, name: string) => void): void {
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop() as string;
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = `${current}/${entry.name}`;
      if (entry.isDirectory()) pending.push(path);
      else onFile(path, entry.name);
    }
  }
}

/** readdir (with types) of the directory tree + stat of every file: what choosing the newest 200 needs. */
function readdirStatFloor(dir: string): void {
  walkTree(dir, (path) => statSync(path));
}

const headBuffer = Buffer.alloc(4096);
function rawHeadReads(files: string[]): void {
  for (const file of files) {
    const fd = openSync(file, 'r');
    readSync(fd, headBuffer, 0, 4096, 0);
    closeSync(fd);
  }
}

/** The I/O floor of an uncached scan: readdir of the tree + open, fstat, read 4 KiB, close per file. */
function ioFloor(dir: string): void {
  walkTree(dir, (path, name) => {
    if (!name.endsWith('.md') || name === 'MEMORY.md') return;
    const fd = openSync(path, 'r');
    fstatSync(fd);
    readSync(fd, headBuffer, 0, 4096, 0);
    closeSync(fd);
  });
}

async function timeOnce(fn: () => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

interface ModeResult {
  ratios: number[];
  repetitionMedians: number[];
  baselines: number[];
  scans: number[];
}

async function measure(
  baseline: () => void,
  scan: () => Promise<unknown>,
  repetitions = REPETITIONS,
  samples = SAMPLES_PER_REPETITION,
): Promise<ModeResult> {
  for (let i = 0; i < 10; i++) {
    baseline();
    await scan();
  }
  const result: ModeResult = { ratios: [], repetitionMedians: [], baselines: [], scans: [] };
  for (let rep = 0; rep < repetitions; rep++) {
    const repRatios: number[] = [];
    for (let s = 0; s < samples; s++) {
      // Alternate the order so neither side always runs on the warmer cache.
      const baseFirst = s % 2 === 0;
      const b1 = baseFirst ? await timeOnce(baseline) : 0;
      const scanMs = await timeOnce(scan);
      const base = baseFirst ? b1 : await timeOnce(baseline);
      result.baselines.push(base);
      result.scans.push(scanMs);
      repRatios.push(scanMs / base);
    }
    result.ratios.push(...repRatios);
    result.repetitionMedians.push(median(repRatios));
  }
  return result;
}

const { dir, files } = buildDir();
try {
  const check = await scanMemoryDir(dir, { cache: false });
  if (check.headers.length !== FILES || check.problems.length !== 0) {
    throw new Error(`scan returned ${check.headers.length} headers and ${check.problems.length} problems`);
  }
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(
    `scanMemoryDir over ${FILES} files (8-line current-form frontmatter, ~3 KB body) vs raw sync 4 KiB head reads; ` +
      `${REPETITIONS}×${SAMPLES_PER_REPETITION} paired samples; ${cpus().length} CPUs (${cpu}); node ${process.version}`,
  );
  const modes: Array<[string, () => Promise<unknown>]> = [
    ['uncached', () => scanMemoryDir(dir, { cache: false })],
    ['cached', () => scanMemoryDir(dir)],
  ];
  for (const [name, scan] of modes) {
    const r = await measure(() => rawHeadReads(files), scan);
    const ratio = median(r.ratios);
    console.log(
      `  ${name}: per-repetition median ratios ${r.repetitionMedians.map((x) => x.toFixed(2)).join(' ')}`,
    );
    console.log(
      `  ${name}: median paired ratio ${ratio.toFixed(2)}× (${ratio <= 2 ? 'PASS' : 'MISS'}; ${ms(median(r.scans))} vs ${ms(median(r.baselines))})`,
    );
    if (name === 'uncached') {
      const floor = await measure(() => ioFloor(dir), scan);
      const floorVsRaw = await measure(
        () => rawHeadReads(files),
        async () => ioFloor(dir),
      );
      console.log(
        `  ${name} vs the I/O floor (readdir + open/fstat/read/close per file; informational): ` +
          `${median(floor.ratios).toFixed(2)}× (${ms(median(floor.scans))} vs ${ms(median(floor.baselines))}); ` +
          `the floor itself is ${median(floorVsRaw.ratios).toFixed(2)}× raw head reads`,
      );
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const LARGE = 10_000;
const large = buildDir(LARGE);
try {
  const check = await scanMemoryDir(large.dir, { cache: false });
  if (check.headers.length !== FILES || check.totalFiles !== LARGE || check.problems.length !== 0) {
    throw new Error(
      `large scan returned ${check.headers.length}/${check.totalFiles} headers, ${check.problems.length} problems`,
    );
  }
  if (check.headers[0]?.filename !== 'topics/memory-0.md')
    throw new Error('large scan did not pick the newest');
  console.log(
    `scanMemoryDir over ${LARGE} files (newest ${FILES} read) vs readdir + stat of every file; 5×8 paired samples`,
  );
  const r = await measure(
    () => readdirStatFloor(large.dir),
    () => scanMemoryDir(large.dir, { cache: false }),
    5,
    8,
  );
  const ratio = median(r.ratios);
  console.log(
    `  10k uncached: per-repetition median ratios ${r.repetitionMedians.map((x) => x.toFixed(2)).join(' ')}`,
  );
  console.log(
    `  10k uncached: median paired ratio ${ratio.toFixed(2)}× (${ratio <= 2 ? 'PASS' : 'MISS'}; ${ms(median(r.scans))} vs ${ms(median(r.baselines))})`,
  );
} finally {
  rmSync(large.dir, { recursive: true, force: true });
}
