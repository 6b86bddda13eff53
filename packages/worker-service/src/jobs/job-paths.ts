import { type EngramPaths, engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import type { WorkersConfig } from '../config.js';

// Every job names its project and launch directory by their sanitized names; this worker resolves them under
// its own ENGRAM_HOME (and ENGRAM_MEMORY_DIR, which must match the agents'). A hosted tenant's job resolves
// under that tenant's area of ENGRAM_HOME (packages/tenants), never the operator's.

export function pathsForJob(
  config: Pick<WorkersConfig, 'engramHome' | 'memoryDirOverride'>,
  payload: { projectDir: string; transcriptDir: string; tenant?: string | undefined },
): EngramPaths {
  return engramPathsFromDirNames({
    engramHome: payload.tenant ? tenantHomeDir(config.engramHome, payload.tenant) : config.engramHome,
    projectDirName: payload.projectDir,
    transcriptDirName: payload.transcriptDir,
    // A tenant's memory is its own: the operator's ENGRAM_MEMORY_DIR never applies to it.
    memoryDirOverride: payload.tenant ? undefined : config.memoryDirOverride,
  });
}
