// The limits the SDK documents for the Memory Stores API (@anthropic-ai/sdk resources/beta/memory-stores and
// tools/agent-toolset/memories.ts); each refusal names the limit it enforces.
export const LIMITS = {
  pathBytes: 1024,
  pathSegments: 20,
  contentBytes: 102_400,
  memoriesPerStore: 2000,
  nameChars: 255,
  descriptionChars: 1024,
  metadataPairs: 16,
  metadataKeyChars: 64,
  metadataValueChars: 512,
  /** `view=basic` list pages (and store / version lists). */
  basicPageMax: 100,
  /** `view=full` list pages. */
  fullPageMax: 20,
  defaultPage: 20,
} as const;
