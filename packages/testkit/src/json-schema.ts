// Moved to @engram/scripted-model (the CLI depends on it without testkit's test-only dependencies).
export * from '@engram/scripted-model/json-schema';
