import { homedir } from 'node:os';
import { type UnattendedBoundary, type WriteJail, worldFor } from '@engram/agent-runtime/sandbox/boundary';
import { type ReadBoundary, rootsBoundary } from '@engram/agent-runtime/sandbox/read-boundary';
import { type EngramPaths, engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import { TenantStore, tenantHomeDir } from '@engram/tenants/tenant-store';
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

/**
 * What a job's fork may read: for a tenant, its own ENGRAM_HOME area and its workspace (packages/tenants),
 * nothing else of ENGRAM_HOME; a job without a tenant (the operator's CLI) anything but `/proc`, `/sys`,
 * `/dev` and other users' homes, so no fork can probe the worker's own environment.
 */
export async function readBoundaryForJob(
  config: Pick<WorkersConfig, 'engramHome'>,
  payload: { tenant?: string | undefined },
): Promise<ReadBoundary> {
  if (!payload.tenant) return { kind: 'local', ownHome: homedir() };
  const home = tenantHomeDir(config.engramHome, payload.tenant);
  const workspaces = await new TenantStore(config.engramHome).workspaces();
  const own = workspaces.find((w) => w.id === payload.tenant)?.workspace;
  return await rootsBoundary(own ? [home, own] : [home]);
}

/**
 * A job's fork boundary (the fork plan's `boundary`): the jail the handler names, the job's read boundary
 * (`readBoundaryForJob`), and Bash's world from it — a tenant's roots (its area and workspace), or a local
 * job's working directory.
 */
export async function jobBoundary(
  config: Pick<WorkersConfig, 'engramHome'>,
  payload: { tenant?: string | undefined },
  jail: WriteJail,
  cwd: string,
): Promise<UnattendedBoundary> {
  const read = await readBoundaryForJob(config, payload);
  return { kind: 'unattended', jail, read, world: worldFor(read, cwd) };
}
