import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { listSnapshots, restoreSnapshot } from '@engram/memory-core/dream/snapshot';
import {
  forgetMemory,
  listMemories,
  readMemoryLinkReport,
  validateMemoryRelPath,
} from '@engram/memory-core/memdir/memory-files';
import { resolveInside } from '@engram/memory-core/paths/containment';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import type { AgentConfig } from '../config.js';
import { EXIT, type Output } from './output.js';

// `engram memory list|show|edit|forget|path`: the user's view of and control over what Engram remembers.

async function pathsFor(config: AgentConfig, cwd: string) {
  return resolveEngramPaths({
    engramHome: config.engramHome,
    cwd,
    ...(config.memoryDirOverride ? { memoryDirOverride: config.memoryDirOverride } : {}),
  });
}

/** A user-caused problem with a memory file: its message says what to do. */
export class MemoryFileError extends EngramError {
  declare readonly code: 'MEMORY_NOT_FOUND';
  constructor(code: 'MEMORY_NOT_FOUND', message: string) {
    super(code, message, { retryable: false });
  }
}

async function memoryFile(config: AgentConfig, cwd: string, file: string): Promise<string> {
  const paths = await pathsFor(config, cwd);
  const rel = validateMemoryRelPath(file);
  const inside = await resolveInside(join(paths.memoryDir, rel), paths.memoryDir);
  if (!inside.ok) throw new Error(`${file}: ${inside.reason}`);
  const stat = await fs.stat(inside.path).catch(() => undefined);
  if (!stat?.isFile()) {
    throw new MemoryFileError(
      'MEMORY_NOT_FOUND',
      `no memory named ${file} in ${paths.memoryDir}. \`engram memory list${cwd === process.cwd() ? '' : ` --cwd ${cwd}`}\` shows the memories there are.`,
    );
  }
  return inside.path;
}

export async function memoryList(
  config: AgentConfig,
  opts: { cwd: string; json: boolean },
  io: Output,
): Promise<number> {
  const paths = await pathsFor(config, opts.cwd);
  const { memories, problems } = await listMemories(paths.memoryDir);
  if (opts.json) {
    io.out(JSON.stringify({ memoryDir: paths.memoryDir, memories, problems }));
    return EXIT.ok;
  }
  if (memories.length === 0) io.out(`No memories yet in ${paths.memoryDir}`);
  for (const m of memories) {
    io.out(
      `${(m.type ?? '-').padEnd(9)} ${m.file.padEnd(32)} ${m.age.padEnd(12)} ${m.name ?? ''}${m.description ? ` — ${m.description}` : ''}`,
    );
  }
  for (const p of problems) io.err(`engram: ${p.filename}: ${p.message}`);
  return EXIT.ok;
}

export async function memoryShow(
  config: AgentConfig,
  opts: { cwd: string; file: string },
  io: Output,
): Promise<number> {
  const text = await fs.readFile(await memoryFile(config, opts.cwd, opts.file), 'utf8');
  io.out(text);
  const paths = await pathsFor(config, opts.cwd);
  const report = await readMemoryLinkReport(paths.memoryDir, opts.file).catch(() => undefined);
  if (report && (report.links.length > 0 || report.backlinks.length > 0)) {
    const link = (l: { slug: string; file?: string }) =>
      l.file ? `[[${l.slug}]] → ${l.file}` : `[[${l.slug}]] (dangling: no memory has this name yet)`;
    io.out(['---- links', ...report.links.map((l) => `  ${link(l)}`)].join('\n'));
    io.out(['---- backlinks', ...report.backlinks.map((f) => `  ${f}`)].join('\n'));
  }
  return EXIT.ok;
}

export async function memoryEdit(
  config: AgentConfig,
  opts: { cwd: string; file: string },
  io: Output,
): Promise<number> {
  const path = await memoryFile(config, opts.cwd, opts.file);
  const editor = process.env.VISUAL || process.env.EDITOR;
  if (!editor) {
    io.err('engram: set $VISUAL or $EDITOR to edit memories (e.g. `export EDITOR=vim`).');
    return EXIT.usage;
  }
  const result = spawnSync(editor, [path], { stdio: 'inherit', shell: true });
  return result.status === 0 ? EXIT.ok : EXIT.failure;
}

export async function memoryForget(
  config: AgentConfig,
  opts: { cwd: string; file: string },
  io: Output,
): Promise<number> {
  const paths = await pathsFor(config, opts.cwd);
  const result = await forgetMemory(paths.memoryDir, opts.file);
  if (!result.fileRemoved && result.indexLinesRemoved === 0) {
    io.err(`engram: no memory named ${opts.file} in ${paths.memoryDir}`);
    return EXIT.failure;
  }
  io.out(
    `Forgot ${opts.file}${result.indexLinesRemoved ? ` (and ${result.indexLinesRemoved} index line${result.indexLinesRemoved === 1 ? '' : 's'})` : ''}.`,
  );
  return EXIT.ok;
}

export async function memoryPath(
  config: AgentConfig,
  opts: { cwd: string; json: boolean },
  io: Output,
): Promise<number> {
  const paths = await pathsFor(config, opts.cwd);
  if (opts.json) {
    io.out(
      JSON.stringify({
        memoryDir: paths.memoryDir,
        index: paths.memoryIndexPath,
        teamDir: paths.teamDir,
        projectRoot: paths.projectRoot,
        transcriptDir: paths.transcriptDir,
      }),
    );
  } else io.out(paths.memoryDir);
  return EXIT.ok;
}

export async function memoryHistory(
  config: AgentConfig,
  opts: { cwd: string; json: boolean },
  io: Output,
): Promise<number> {
  const paths = await pathsFor(config, opts.cwd);
  const snapshots = await listSnapshots(paths.memoryDir);
  if (opts.json) {
    io.out(JSON.stringify({ memoryDir: paths.memoryDir, snapshots }));
    return EXIT.ok;
  }
  if (snapshots.length === 0)
    io.out(`No snapshots in ${paths.memoryDir} (a consolidation takes one before it writes).`);
  for (const s of snapshots) {
    io.out(`${s.id}  ${s.createdAt}  ${String(s.files.length).padStart(3)} files  ${s.label ?? ''}`);
  }
  return EXIT.ok;
}

export async function memoryRestore(
  config: AgentConfig,
  opts: { cwd: string; snapshot: string },
  io: Output,
): Promise<number> {
  const paths = await pathsFor(config, opts.cwd);
  const result = await restoreSnapshot(paths.memoryDir, opts.snapshot, {
    backupLabel: 'before engram memory restore',
  });
  io.out(
    `Restored ${result.restored.length} file${result.restored.length === 1 ? '' : 's'} from ${result.id}` +
      (result.removed.length ? `, removed ${result.removed.length} created after it` : '') +
      (result.backupId ? `. The previous state is snapshot ${result.backupId} (restore it to undo).` : '.'),
  );
  return EXIT.ok;
}
