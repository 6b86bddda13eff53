import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { splitFrontmatter } from '../memdir/frontmatter.js';
import { type IndexOverflow, removeIndexEntry, truncateEntrypoint } from '../memdir/index-file.js';
import { type LinkPlanEntry, planLinkRenames, rewriteMemoryLinks } from '../memdir/links.js';
import { ensureIndexPointer, validateMemoryRelPath } from '../memdir/memory-files.js';
import { ENTRYPOINT_NAME, TEAM_DIRNAME } from '../paths/memory-paths.js';
import type { DreamManifest } from './manifest.js';
import { type ConsolidationAssessment, countIndexLines } from './safety.js';

// What the worker does mechanically after a consolidation passed the safety check: delete the files the fork
// emptied (its tools cannot delete; emptying is how it asks), drop their index lines, and make sure every file
// it created or changed has a pointer — pointer upkeep is guaranteed, not trusted to the model (as extract does).
// Given the manifests from before and after the run, it also keeps `[[slug]]` links valid: links to a memory
// the run renamed, merged into another or deleted are rewritten in every surviving memory's body
// (docs/claude-code-format.md, "Links").

export interface FinalizeResult {
  /** Emptied files removed from disk. */
  removedFiles: string[];
  /** Index lines removed because they pointed at a deleted file. */
  indexLinesRemoved: number;
  /** Files that got a pointer they lacked. */
  pointersAdded: string[];
  /** Surviving files whose `[[links]]` were rewritten (only with `before`/`after`). */
  linksRewritten: string[];
  /** Lines of MEMORY.md after finalizing. */
  indexLinesAfter: number;
  /** Which load cap the final index exceeds, if any (never silent: report it to the user and in metrics). */
  indexOverflow?: IndexOverflow['cap'];
}

export async function finalizeConsolidation(
  memoryDir: string,
  assessment: Pick<ConsolidationAssessment, 'deleted' | 'created' | 'updated' | 'rebuildIndex'> &
    Partial<Pick<ConsolidationAssessment, 'replaced'>>,
  opts: { survivors?: readonly string[]; before?: DreamManifest; after?: DreamManifest } = {},
): Promise<FinalizeResult> {
  const removedFiles: string[] = [];
  let indexLinesRemoved = 0;
  for (const file of assessment.deleted) {
    const rel = validateMemoryRelPath(file);
    const path = join(memoryDir, rel);
    const content = await fs.readFile(path, 'utf8').catch(() => undefined);
    // Only an emptied file is removed: anything with content was written after the assessment.
    if (content !== undefined && content.trim() === '') {
      await fs.rm(path, { force: true });
      removedFiles.push(rel);
    }
    const inTeam = rel.startsWith(`${TEAM_DIRNAME}/`);
    const indexPath = join(memoryDir, ...(inTeam ? [TEAM_DIRNAME] : []), ENTRYPOINT_NAME);
    const { removed } = await removeIndexEntry(indexPath, inTeam ? rel.slice(TEAM_DIRNAME.length + 1) : rel);
    indexLinesRemoved += removed;
  }
  const needPointer = new Set([...assessment.created, ...assessment.updated]);
  if (assessment.rebuildIndex) for (const file of opts.survivors ?? []) needPointer.add(file);
  const pointersAdded: string[] = [];
  for (const file of needPointer) {
    if ((await ensureIndexPointer(memoryDir, file)).added) pointersAdded.push(file);
  }
  const linksRewritten =
    opts.before && opts.after ? await keepLinksValid(memoryDir, opts.before, opts.after, assessment) : [];
  const index = await fs.readFile(join(memoryDir, ENTRYPOINT_NAME), 'utf8').catch(() => '');
  const overflow = truncateEntrypoint(index).overflow;
  return {
    removedFiles,
    indexLinesRemoved,
    pointersAdded,
    linksRewritten,
    indexLinesAfter: countIndexLines(index),
    ...(overflow ? { indexOverflow: overflow.cap } : {}),
  };
}

function planEntries(manifest: DreamManifest, gone: ReadonlySet<string>): LinkPlanEntry[] {
  return manifest.map((e) => ({
    file: e.file,
    ...(e.name ? { name: e.name } : {}),
    gone: e.empty || gone.has(e.file),
  }));
}

/** Rewrites links to renamed, merged or deleted memories in the bodies of the survivors. */
async function keepLinksValid(
  memoryDir: string,
  before: DreamManifest,
  after: DreamManifest,
  assessment: { deleted: readonly string[]; replaced?: ReadonlyArray<{ file: string; into: string }> },
): Promise<string[]> {
  const gone = new Set(assessment.deleted);
  const plan = planLinkRenames(
    planEntries(before, new Set()),
    planEntries(after, gone),
    assessment.replaced ?? [],
  );
  if (plan.size === 0) return [];
  const rewritten: string[] = [];
  for (const entry of after) {
    if (entry.empty || gone.has(entry.file)) continue;
    const path = join(memoryDir, validateMemoryRelPath(entry.file));
    const text = await fs.readFile(path, 'utf8').catch(() => undefined);
    if (text === undefined || !text.includes('[[')) continue;
    let bodyStart = 0;
    try {
      const split = splitFrontmatter(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, entry.file);
      if (split.kind === 'block') bodyStart = split.bodyStart + (text.charCodeAt(0) === 0xfeff ? 1 : 0);
    } catch {
      continue; // not a readable memory: left as it is
    }
    const body = text.slice(bodyStart);
    const next = rewriteMemoryLinks(body, plan);
    if (next === body) continue;
    await writeFileAtomic(path, text.slice(0, bodyStart) + next, { mode: 0o600 });
    rewritten.push(entry.file);
  }
  return rewritten;
}
