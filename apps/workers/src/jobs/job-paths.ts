import { type EngramPaths, engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import type { WorkersConfig } from '../config.js';

// Every job names its project and launch directory by their sanitized names; this worker resolves them under
// its own ENGRAM_HOME (and ENGRAM_MEMORY_DIR, which must match the agents').

export function pathsForJob(
  config: Pick<WorkersConfig, 'engramHome' | 'memoryDirOverride'>,
  payload: { projectDir: string; transcriptDir: string },
): EngramPaths {
  return engramPathsFromDirNames({
    engramHome: config.engramHome,
    projectDirName: payload.projectDir,
    transcriptDirName: payload.transcriptDir,
    memoryDirOverride: config.memoryDirOverride,
  });
}
