import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { type IndexOverflow, removeIndexEntry, truncateEntrypoint } from '../memdir/index-file.js';
import { ensureIndexPointer, validateMemoryRelPath } from '../memdir/memory-files.js';
import { ENTRYPOINT_NAME, TEAM_DIRNAME } from '../paths/memory-paths.js';
import { type ConsolidationAssessment, countIndexLines } from './safety.js';

// What the worker does mechanically after a consolidation passed the safety check: delete the files the fork
// emptied (its tools cannot delete; emptying is how it asks), drop their index lines, and make sure every file
// it created or changed has a pointer — pointer upkeep is guaranteed, not trusted to the model (as extract does).

export interface FinalizeResult {
  /** Emptied files removed from disk. */
  removedFiles: string[];
  /** Index lines removed because they pointed at a deleted file. */
  indexLinesRemoved: number;
  /** Files that got a pointer they lacked. */
  pointersAdded: string[];
  /** Lines of MEMORY.md after finalizing. */
  indexLinesAfter: number;
  /** Which load cap the final index exceeds, if any (never silent: report it to the user and in metrics). */
  indexOverflow?: IndexOverflow['cap'];
}

export async function finalizeConsolidation(
  memoryDir: string,
  assessment: Pick<ConsolidationAssessment, 'deleted' | 'created' | 'updated' | 'rebuildIndex'>,
  opts: { survivors?: readonly string[] } = {},
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
  const index = await fs.readFile(join(memoryDir, ENTRYPOINT_NAME), 'utf8').catch(() => '');
  const overflow = truncateEntrypoint(index).overflow;
  return {
    removedFiles,
    indexLinesRemoved,
    pointersAdded,
    indexLinesAfter: countIndexLines(index),
    ...(overflow ? { indexOverflow: overflow.cap } : {}),
  };
}
