import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkNode, RUNTIME_NODE_MAJOR } from './doctor.js';

// `engram doctor`'s Node line: never a failure on a version `engines` admits, a note on one past its end of life
// or older than the runtime the image and CI run.

describe('engram doctor: the Node line', () => {
  it('names the runtime as it is on the image and CI major, and on a newer one', () => {
    expect(checkNode('v24.22.3', '2026-12-03')).toEqual({ ok: true, name: 'node', detail: 'v24.22.3' });
    expect(checkNode('v25.1.0', '2026-12-03')).toEqual({ ok: true, name: 'node', detail: 'v25.1.0' });
  });

  it('notes an end-of-life Node 20 and what it costs telemetry, without failing', () => {
    const line = checkNode('v20.20.2', '2026-12-03');
    expect(line.ok).toBe(true);
    expect(line.detail).toBe(
      'v20.20.2 (end-of-life since 2026-04-30; the image and CI run Node 24, where telemetry costs about half as much per served turn)',
    );
    // Before its end of life the same version is only older than the runtime.
    expect(checkNode('v20.20.2', '2026-04-01').detail).toBe(
      'v20.20.2 (the image and CI run Node 24, where telemetry costs about half as much per served turn)',
    );
  });

  it('notes Node 22 as older than the runtime until its own end of life', () => {
    expect(checkNode('v22.12.0', '2026-12-03').detail).toBe('v22.12.0 (the image and CI run Node 24)');
    expect(checkNode('v22.12.0', '2027-05-01').detail).toBe(
      'v22.12.0 (end-of-life since 2027-04-30; the image and CI run Node 24)',
    );
  });

  it('says the major that CI tests (and the image runs: apps/workers compose-file.test.ts)', () => {
    const ci = readFileSync(fileURLToPath(new URL('../../../../.ci/run', import.meta.url)), 'utf8');
    expect(Number(/^NODE_CI_VERSION=(\d+)\./m.exec(ci)?.[1])).toBe(RUNTIME_NODE_MAJOR);
  });
});
