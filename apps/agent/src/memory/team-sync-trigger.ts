// The foreground's team memory sync lives in @engram/memory-client (shared with @engram/agent-sdk).
export * from '@engram/memory-client/team-sync-trigger';
