import type { ToolDefinition } from '../model/types.js';
import { bashTool } from './bash.js';
import { editTool } from './edit.js';
import { globTool } from './glob.js';
import { grepTool } from './grep.js';
import { readTool } from './read.js';
import type { AnyTool } from './tool.js';
import { writeTool } from './write.js';

// The standard tool set, in a fixed order: the tool list is part of the prompt-cache key, so the same
// tools must always produce the same bytes in the same order.

export function defaultTools(): AnyTool[] {
  return [bashTool, globTool, grepTool, readTool, editTool, writeTool];
}

export function toolDefinitions(tools: readonly AnyTool[]): ToolDefinition[] {
  return tools.map((t) => t.definition());
}

export function findTool(tools: readonly AnyTool[], name: string): AnyTool | undefined {
  return tools.find((t) => t.name === name);
}
