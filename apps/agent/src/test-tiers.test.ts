import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { END_TO_END_SUITES } from '../../../vitest.shared.js';

// `npm run test:fast` leaves out the end-to-end tier by path: a renamed or moved suite must not silently join
// the fast loop (or vanish from the list).

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe('test tiers', () => {
  it('every end-to-end suite the fast loop leaves out exists', () => {
    for (const path of END_TO_END_SUITES) expect(existsSync(join(ROOT, path)), path).toBe(true);
  });
});
