import {
  type CanUseTool,
  type MemoryPolicyOptions,
  memoryWritePolicy,
} from '../policy/memory-permissions.js';

// The consolidation fork's permissions: the memory write policy, which refuses every hidden entry
// of the memory directory. `.history/` holds the snapshots that make a dream reversible and
// `.consolidate-lock` the shared "last consolidated" stamp; a fork that could rewrite them could undo its own
// safety net. The dream job jails the fork to the memory directory (its boundary, beside this filter).

export function consolidationPolicy(memoryDir: string, opts: MemoryPolicyOptions = {}): CanUseTool {
  return memoryWritePolicy(memoryDir, opts);
}
