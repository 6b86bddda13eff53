import { describe, expect, it } from 'vitest';
import { ConfigError } from './env.js';
import { parseSandboxLimits } from './sandbox-limits.js';

describe('sandbox limits', () => {
  it('has defaults, reads each setting, and refuses a value that is not a positive integer', () => {
    expect(parseSandboxLimits({})).toEqual({
      maxProcesses: 256,
      memoryMb: 2048,
      cpuSeconds: 300,
      fileMb: 512,
    });
    expect(
      parseSandboxLimits({
        ENGRAM_SANDBOX_MAX_PROCS: '32',
        ENGRAM_SANDBOX_MEMORY_MB: '512',
        ENGRAM_SANDBOX_CPU_SECONDS: '10',
        ENGRAM_SANDBOX_FILE_MB: '8',
      }),
    ).toEqual({ maxProcesses: 32, memoryMb: 512, cpuSeconds: 10, fileMb: 8 });
    for (const bad of ['0', '-1', 'many', '1.5']) {
      expect(() => parseSandboxLimits({ ENGRAM_SANDBOX_MAX_PROCS: bad })).toThrow(ConfigError);
    }
    expect(() => parseSandboxLimits({ ENGRAM_SANDBOX_CPU_SECONDS: 'x' })).toThrow(
      /ENGRAM_SANDBOX_CPU_SECONDS/,
    );
  });
});
