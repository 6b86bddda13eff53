import { EngramError } from '@engram/errors/engram-error';
import { z } from 'zod';
import type { ImageBlock, TextBlock, ToolDefinition } from '../model/types.js';
import type { ToolBoundary } from '../sandbox/unattended.js';

// What a tool is to the query loop: a zod input schema (which also yields the API definition), read-only
// and concurrency answers for a given input, and `call`. Permission is not the tool's business: the loop
// asks `canUseTool` before every call.

export interface FileReadRecord {
  /** The file's mtime when it was read (or written by a tool). */
  mtimeMs: number;
  /** sha256 of the full contents, when the whole file was read: lets a touched-but-unchanged file pass. */
  contentHash?: string;
  offset?: number;
  limit?: number;
  /** Content injected rather than read by the model (e.g. CLAUDE.md): does not count as a Read. */
  isPartialView?: boolean;
}

/** Which files the model has seen in this context, and as of when. Write/Edit require an up-to-date entry. */
export class ReadFileState {
  private readonly files: Map<string, FileReadRecord>;

  constructor(entries?: Iterable<[string, FileReadRecord]>) {
    this.files = new Map(entries);
  }

  get(absolutePath: string): FileReadRecord | undefined {
    return this.files.get(absolutePath);
  }

  set(absolutePath: string, record: FileReadRecord): void {
    this.files.set(absolutePath, record);
  }

  has(absolutePath: string): boolean {
    return this.files.has(absolutePath);
  }

  delete(absolutePath: string): void {
    this.files.delete(absolutePath);
  }

  get size(): number {
    return this.files.size;
  }

  entries(): IterableIterator<[string, FileReadRecord]> {
    return this.files.entries();
  }

  /** An independent copy (a fork "has read" what its parent read, without sharing later updates). */
  clone(): ReadFileState {
    return new ReadFileState([...this.files].map(([k, v]) => [k, { ...v }]));
  }
}

export interface ToolContext {
  cwd: string;
  readFileState: ReadFileState;
  signal?: AbortSignal;
  toolUseId: string;
  /** Base environment for Bash (secrets are scrubbed from it). Default: process.env. */
  env?: NodeJS.ProcessEnv;
  /** Modes for files and directories a tool creates. Default 0o644 / 0o755 (workspace files). */
  fileModes?: { file: number; dir: number };
  /**
   * The run's filesystem boundary, stated by its caller (sandbox/boundary.ts) and prepared once per run
   * (sandbox/unattended.ts). Unattended: Bash runs in the OS sandbox (or not at all), Write/Edit land only
   * below its write roots through the race-free jailed write, Read, Grep, Glob and the read-before-write
   * open only what its read boundary admits, judged on the opened inode, and paths under its alias's
   * `visible` directory are the same paths under `actual`. Attended: a person approves each call; any path,
   * still regular files only, non-blocking and capped.
   */
  boundary: ToolBoundary;
}

export interface ToolOutput {
  content: string | Array<TextBlock | ImageBlock>;
  isError?: boolean;
  /**
   * Facts beside the model-visible result, stored in the transcript (`toolUseResults`) but never sent:
   * e.g. `{ filePath, mtimeMs }` so a fork can tell which files its parent read.
   */
  record?: Record<string, unknown>;
}

export interface Tool<I = Record<string, unknown>> {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: z.ZodType<I>;
  /** The API tool definition; byte-stable for a given tool. */
  definition(): ToolDefinition;
  isReadOnly(input: I): boolean;
  isConcurrencySafe(input: I): boolean;
  /** Results longer than this are persisted to tool-results/ (Infinity: never; Read bounds itself). */
  readonly maxResultChars: number;
  call(input: I, ctx: ToolContext): Promise<ToolOutput>;
}

/** A tool with its input type erased, as the loop and registries hold them. */
// biome-ignore lint/suspicious/noExplicitAny: tools of different input types live in one list.
export type AnyTool = Tool<any>;

export type PermissionDecision =
  | { behavior: 'allow' }
  /** `reason`: an optional machine-readable cause (e.g. for denial metrics), passed through to results. */
  | { behavior: 'deny'; message: string; reason?: string };

export interface PermissionContext {
  toolUseId: string;
  cwd: string;
  signal?: AbortSignal;
}

/**
 * The permission hook. Structural on purpose: policies that know nothing of this package's Tool type
 * (memory-core's) plug in as long as they accept `{ name, isReadOnly? }` and the parsed input.
 */
export type CanUseTool = (
  tool: { name: string; isReadOnly?(input: Record<string, unknown>): boolean },
  input: Record<string, unknown>,
  ctx?: PermissionContext,
) => PermissionDecision | Promise<PermissionDecision>;

export const allowAll: CanUseTool = () => ({ behavior: 'allow' });

/** A tool's own failure (bad input for the file at hand, stale read, …): reported to the model as is_error. */
/**
 * A tool call that failed in a way the model can act on (its message goes back as the tool result). Not
 * retryable: the same call with the same input fails again; the model changes the call instead.
 */
export class ToolError extends EngramError {
  constructor(code: string, message: string) {
    super(code, message, { retryable: false });
  }
}

/** JSON schema for the API from a zod schema, without the `$schema` key the API does not want. */
export function toInputSchema(schema: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as Record<string, unknown>;
  const { $schema: _ignored, ...rest } = json;
  return rest;
}

export function defineTool<I>(spec: {
  name: string;
  description: string;
  inputSchema: z.ZodType<I>;
  maxResultChars: number;
  isReadOnly: (input: I) => boolean;
  isConcurrencySafe?: (input: I) => boolean;
  call: (input: I, ctx: ToolContext) => Promise<ToolOutput>;
}): Tool<I> {
  let cached: ToolDefinition | undefined;
  return {
    name: spec.name,
    description: spec.description,
    inputSchema: spec.inputSchema,
    maxResultChars: spec.maxResultChars,
    definition() {
      cached ??= {
        name: spec.name,
        description: spec.description,
        input_schema: toInputSchema(spec.inputSchema),
      };
      return cached;
    },
    isReadOnly: spec.isReadOnly,
    isConcurrencySafe: spec.isConcurrencySafe ?? spec.isReadOnly,
    call: spec.call,
  };
}
