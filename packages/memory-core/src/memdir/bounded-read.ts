import { constants, promises as fs, type Stats } from 'node:fs';
import { EngramError } from '@engram/errors/engram-error';

// The one bounded read of a file in a memory directory that a tenant or the model may have shaped: opened
// non-blocking (a FIFO named like a memory must not hang the thread pool), judged on the descriptor (regular
// files only, never on a path checked before the open), and read up to a cap counted on the bytes read (a
// file that grows or lies about its size cannot make the read unbounded).

const NONBLOCK = constants.O_NONBLOCK ?? 0;
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

export interface BoundedRead {
  stat: Stats;
  bytes: Buffer;
  /** More bytes followed the cap. */
  truncated: boolean;
}

export class NotARegularFileError extends EngramError {
  constructor(message: string) {
    super('NOT_A_REGULAR_FILE', message, { retryable: false });
  }
}

/**
 * Reads at most `maxBytes` of `path`. `followSymlinks: false` refuses a symlink in the last component (ELOOP), for
 * callers that resolved the path inside their directory just before. Throws NotARegularFileError for a FIFO,
 * device, socket or directory; other errors (ENOENT, …) pass through with their code.
 */
export async function readRegularFileBounded(
  path: string,
  maxBytes: number,
  options: { followSymlinks?: boolean } = {},
): Promise<BoundedRead> {
  const flags = constants.O_RDONLY | NONBLOCK | (options.followSymlinks === false ? NOFOLLOW : 0);
  const handle = await fs.open(path, flags);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new NotARegularFileError(`${path} is not a regular file; it is not read.`);
    // Sized by what the descriptor says (one read to the end, one to see the end), grown while the file grows,
    // never past the cap plus the one byte that tells a truncation.
    const limit = maxBytes + 1;
    let buffer = Buffer.allocUnsafe(Math.min(limit, stat.size + 1));
    let filled = 0;
    for (;;) {
      if (filled === buffer.length) {
        if (buffer.length >= limit) break;
        const grown = Buffer.allocUnsafe(Math.min(limit, buffer.length * 2));
        buffer.copy(grown, 0, 0, filled);
        buffer = grown;
      }
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { stat, bytes: buffer.subarray(0, Math.min(filled, maxBytes)), truncated: filled > maxBytes };
  } finally {
    await handle.close();
  }
}
