import { relative, resolve, sep } from 'node:path';
import picomatch from 'picomatch';
import { z } from 'zod';
import { resolveToolPath } from './file-state.js';
import { judgeListed, judgeSearchRoot } from './search-boundary.js';
import { defineTool, ToolError } from './tool.js';
import { walkFiles } from './walk.js';

// Glob: file paths matching a pattern, newest first, capped (Claude Code returns at most 100).

export const MAX_GLOB_RESULTS = 100;

export const globInputSchema = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .describe('The glob pattern to match files against (e.g. "**/*.ts", "src/**/*.md")'),
  path: z
    .string()
    .optional()
    .describe('The directory to search in. Defaults to the current working directory.'),
});
export type GlobInput = z.infer<typeof globInputSchema>;

function toPosix(path: string): string {
  return sep === '/' ? path : path.split(sep).join('/');
}

export const globTool = defineTool<GlobInput>({
  name: 'Glob',
  description: [
    'Fast file pattern matching for any codebase size.',
    '- Supports glob patterns like "**/*.js" or "src/**/*.ts".',
    `- Returns matching file paths sorted by modification time (newest first), at most ${MAX_GLOB_RESULTS}.`,
  ].join('\n'),
  inputSchema: globInputSchema,
  maxResultChars: 100_000,
  isReadOnly: () => true,
  async call(input, ctx) {
    const root = resolveToolPath(ctx.cwd, input.path ?? '.');
    // The root is judged on the directory it opens (a symlinked root out of the boundary is refused).
    await judgeSearchRoot(ctx.readBoundary, root, input.path ?? root, true);
    // An absolute pattern is matched against absolute paths; walk only from its static base.
    let pattern = input.pattern;
    let walkRoot = root;
    if (pattern.startsWith('/')) {
      const { base, glob } = picomatch.scan(pattern);
      walkRoot = resolve(base || '/');
      pattern = glob || '**';
    } else {
      const { base, glob, isGlob } = picomatch.scan(pattern);
      if (base && isGlob) {
        walkRoot = resolve(root, base);
        pattern = glob;
      }
    }
    // The base the walk starts from is judged too (an absolute pattern or `../x/**` names another tree).
    let walkReal: string;
    try {
      walkReal = (await judgeSearchRoot(ctx.readBoundary, walkRoot, walkRoot, true)).realPath;
    } catch (e) {
      if (e instanceof ToolError && (e.code === 'not_found' || e.code === 'not_directory')) {
        return { content: 'No files found' };
      }
      throw e;
    }
    const matcher = picomatch(pattern, { dot: true });
    const found: Array<{ path: string; mtimeMs: number }> = [];
    for await (const file of walkFiles(walkRoot, ctx.signal ? { signal: ctx.signal } : {})) {
      if (!matcher(toPosix(relative(walkRoot, file)))) continue;
      // The walk never follows a link, but a directory renamed into a link mid-walk would be: each listed
      // name is judged on what it opens now, inside the boundary and the judged base, or left out.
      const judged = await judgeListed(ctx.readBoundary, walkReal, file);
      if (judged) found.push({ path: file, mtimeMs: judged.stat.mtimeMs });
    }
    if (found.length === 0) return { content: 'No files found' };
    found.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.path < b.path ? -1 : 1));
    const shown = found.slice(0, MAX_GLOB_RESULTS).map((f) => f.path);
    const note =
      found.length > shown.length
        ? `\n(Results are truncated: showing ${shown.length} of ${found.length}. Consider using a more specific path or pattern.)`
        : '';
    return { content: shown.join('\n') + note };
  },
});
