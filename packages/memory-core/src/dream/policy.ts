import {
  type JailedPolicy,
  type MemoryPolicyOptions,
  memoryWritePolicy,
} from '../policy/memory-permissions.js';

// The consolidation fork's permissions: the memory write policy, which refuses every hidden entry
// of the memory directory. `.history/` holds the snapshots that make a dream reversible and
// `.consolidate-lock` the shared "last consolidated" stamp; a fork that could rewrite them could undo its own
// safety net. The policy also declares the memory directory as the fork's write jail.

export function consolidationPolicy(memoryDir: string, opts: MemoryPolicyOptions = {}): JailedPolicy {
  return memoryWritePolicy(memoryDir, opts);
}
