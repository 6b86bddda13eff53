import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * Claude Code's config directory (CLAUDE_CONFIG_DIR, else ~/.claude): Engram's home for Claude Code's hooks and
 * the plugin's MCP server, so the workers read Claude Code's transcripts and write Claude Code's memory.
 * Node built-ins only (the lean hook entry loads it).
 */
export function claudeHome(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.CLAUDE_CONFIG_DIR || join(env.HOME || homedir(), '.claude'));
}
