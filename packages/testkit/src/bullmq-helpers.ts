import { randomBytes } from 'node:crypto';

// Per-test isolation for BullMQ, as BullMQ's own tests do it: a fresh key prefix per test and every
// Queue/Worker/QueueEvents closed afterwards.

export function uniquePrefix(label = 't'): string {
  return `engram-test-${label}-${randomBytes(5).toString('hex')}`;
}

interface Closable {
  close(): Promise<unknown>;
}

/** Collects BullMQ objects (or anything closable) and closes them all, newest first. */
export class Closer {
  private readonly items: Array<Closable | (() => Promise<unknown>)> = [];

  add<T extends Closable>(item: T): T {
    this.items.push(item);
    return item;
  }

  defer(fn: () => Promise<unknown>): void {
    this.items.push(fn);
  }

  async closeAll(): Promise<void> {
    const errors: unknown[] = [];
    while (this.items.length) {
      const item = this.items.pop()!;
      try {
        await (typeof item === 'function' ? item() : item.close());
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length) throw new AggregateError(errors, `${errors.length} resources failed to close`);
  }
}
