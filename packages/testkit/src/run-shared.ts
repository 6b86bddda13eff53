// One resource for a whole Vitest run however many projects ask for it (`npm run test:fast` runs every package
// as a project in one Vitest process): the first project's setup starts it, every project gets the same one, and
// the teardown of the last releases it. Kept on globalThis, which the projects share even where each loads its
// own copy of the setup module.

interface Shared {
  started: Promise<unknown>;
  stop: (value: never) => Promise<void> | void;
  users: number;
}
const KEY = Symbol.for('engram.test.runShared');
const holder = globalThis as { [KEY]?: Map<string, Shared> };
const shared = holder[KEY] ?? new Map<string, Shared>();
holder[KEY] = shared;

/** The run's resource `name`: started by `start` for the first taker, stopped by `stop` after the last release. */
export function takeShared<T>(
  name: string,
  start: () => Promise<T>,
  stop: (value: T) => Promise<void> | void,
): { value: Promise<T>; release: () => Promise<void> } {
  let entry = shared.get(name);
  if (!entry) {
    entry = { started: start(), stop: stop as Shared['stop'], users: 0 };
    shared.set(name, entry);
  }
  entry.users += 1;
  const mine = entry;
  let released = false;
  return {
    value: mine.started as Promise<T>,
    release: async () => {
      if (released) return;
      released = true;
      mine.users -= 1;
      if (mine.users > 0) return;
      if (shared.get(name) === mine) shared.delete(name);
      await mine.started.then(
        (value) => mine.stop(value as never),
        () => {},
      );
    },
  };
}
