import { isAbsolute, relative, resolve, sep } from 'node:path';
import {
  type CanUseTool,
  FILE_WRITE_TOOLS,
  type MemoryPolicyOptions,
  memoryWritePolicy,
} from '../policy/memory-permissions.js';

// The consolidation fork's permissions: the memory write policy (DESIGN §6), minus hidden entries of the
// memory directory. `.history/` holds the snapshots that make a dream reversible and `.consolidate-lock`
// the shared "last consolidated" stamp; a fork that could rewrite them could undo its own safety net.

export function consolidationPolicy(memoryDir: string, opts: MemoryPolicyOptions = {}): CanUseTool {
  const base = memoryWritePolicy(memoryDir, opts);
  const root = resolve(memoryDir);
  return async (tool, input) => {
    const decision = await base(tool, input);
    if (decision.behavior !== 'allow' || !FILE_WRITE_TOOLS.includes(tool.name)) return decision;
    const filePath = String(input.file_path);
    const rel = relative(root, isAbsolute(filePath) ? resolve(filePath) : resolve(root, filePath));
    if (rel.split(sep).some((segment) => segment.startsWith('.'))) {
      opts.onDenial?.({ tool: tool.name, reason: 'path_outside_memory' });
      return {
        behavior: 'deny',
        reason: 'path_outside_memory',
        message:
          `${tool.name} is not allowed on hidden files or directories of the memory directory (snapshots and ` +
          'the consolidation lock live there). Write memories as visible .md files.',
      };
    }
    return decision;
  };
}
