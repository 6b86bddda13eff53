import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';

// The names scripts/check-test-tools.mjs looks for before the suites start (which names a missing Chromium).
const CHROMIUM_NAMES = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'];

/** CHROMIUM_PATH, else the first Chromium on PATH; an error naming both when there is none. */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CHROMIUM_PATH) return env.CHROMIUM_PATH;
  for (const name of CHROMIUM_NAMES) {
    for (const dir of (env.PATH ?? '').split(delimiter)) {
      if (!dir) continue;
      try {
        accessSync(join(dir, name), constants.X_OK);
        return join(dir, name);
      } catch {}
    }
  }
  throw new Error(
    `No Chromium found: set CHROMIUM_PATH or put one of ${CHROMIUM_NAMES.join(', ')} on PATH (Debian/Ubuntu: apt-get install -y chromium).`,
  );
}

/** A system Chromium (see chromiumPath), headless, with nothing that reaches out on its own. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}
