// The foreground's memory work (MemoryQueue) lives in @engram/memory-client, shared with @engram/agent-sdk;
// AgentConfig is a MemoryQueueConfig. Re-exported here so the agent's modules keep one import path.
export * from '@engram/memory-client/memory-queue';
