import { join, resolve } from 'node:path';
import picomatch from 'picomatch';
import { z } from 'zod';
import { actualPath, visiblePath } from '../sandbox/boundary.js';
import type { HeldEntry } from '../sandbox/read-boundary.js';
import { aliasOf, readBoundaryOf } from '../sandbox/unattended.js';
import { shownText, toolPath } from './file-state.js';
import { holdSearchRoot, judgeListed, judgeSearchRoot } from './search-boundary.js';
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
    const boundary = readBoundaryOf(ctx.boundary);
    const alias = aliasOf(ctx.boundary);
    const { actual: root, shown: shownRoot } = toolPath(ctx, input.path ?? '.');
    // The root is judged on the directory it opens (a symlinked root out of the boundary is refused).
    await judgeSearchRoot(boundary, root, input.path ?? shownRoot, true).catch((e: unknown) => {
      throw e instanceof ToolError ? new ToolError(e.code, shownText(ctx, e.message)) : e;
    });
    // An absolute pattern is matched against absolute paths; walk only from its static base.
    let pattern = input.pattern;
    let walkRoot = root;
    if (pattern.startsWith('/')) {
      const { base, glob } = picomatch.scan(pattern);
      walkRoot = actualPath(alias, resolve(base || '/'));
      pattern = glob || '**';
    } else {
      const { base, glob, isGlob } = picomatch.scan(pattern);
      if (base && isGlob) {
        // Resolved against the root as the model named it, then mapped, like every path a tool is given.
        walkRoot = actualPath(alias, resolve(shownRoot, base));
        pattern = glob;
      }
    }
    // The base the walk starts from is judged too (an absolute pattern or `../x/**` names another tree), and
    // held open: the walk runs from its descriptor, each directory below opened relative to its parent with
    // O_NOFOLLOW, so neither the base nor a directory at any depth swapped for a link is ever followed.
    let held: HeldEntry;
    try {
      held = await holdSearchRoot(boundary, walkRoot, visiblePath(alias, walkRoot), true);
    } catch (e) {
      if (e instanceof ToolError && (e.code === 'NOT_FOUND' || e.code === 'NOT_DIRECTORY')) {
        return { content: 'No files found' };
      }
      throw e instanceof ToolError ? new ToolError(e.code, shownText(ctx, e.message)) : e;
    }
    // Listed as the model names the tree (under an alias, its visible path).
    const listedRoot = visiblePath(alias, walkRoot);
    const matcher = picomatch(pattern, { dot: true });
    const found: Array<{ path: string; mtimeMs: number }> = [];
    try {
      const options = { descriptors: true, ...(ctx.signal ? { signal: ctx.signal } : {}) };
      for await (const rel of walkFiles(held.anchor, options)) {
        if (!matcher(rel)) continue;
        // Each listed name is judged on what it opens now, below the held base (never by the base's name),
        // inside the boundary and the judged base, or left out.
        const judged = await judgeListed(boundary, held.realPath, `${held.anchor}/${rel}`);
        if (judged) found.push({ path: join(listedRoot, ...rel.split('/')), mtimeMs: judged.stat.mtimeMs });
      }
    } finally {
      await held.handle.close();
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
