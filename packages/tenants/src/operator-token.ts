import { randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join, resolve } from 'node:path';
import { createExclusive } from '@engram/fs-atomic/atomic-write';

// The operator's token for the workers' dashboard, the memory browser and the per-tenant series of `/metrics`
// (API and workers). When ENGRAM_DASHBOARD_TOKEN (or basic auth) is not set, one is generated into
// `$ENGRAM_HOME/.dashboard-token` (0600) — the file docker-compose's init service already writes — so these
// pages are closed in every mode. It sits at the root of ENGRAM_HOME: in no tenant's area (`tenants/<id>/`),
// and no workspace may contain ENGRAM_HOME.

export const OPERATOR_TOKEN_FILENAME = '.dashboard-token';

export function operatorTokenPath(engramHome: string): string {
  return join(resolve(engramHome), OPERATOR_TOKEN_FILENAME);
}

/** The token in the file, made (exclusively, mode 0600) when there is none. */
export async function ensureOperatorToken(
  engramHome: string,
): Promise<{ token: string; path: string; created: boolean }> {
  const path = operatorTokenPath(engramHome);
  const fresh = randomBytes(24).toString('hex');
  if (await createExclusive(path, `${fresh}\n`, { mode: 0o600, dirMode: 0o700 })) {
    return { token: fresh, path, created: true };
  }
  const token = await readOperatorToken(engramHome);
  if (!token)
    throw new Error(`${path} holds no token of at least 16 characters; delete it to make a new one.`);
  return { token, path, created: false };
}

export async function readOperatorToken(engramHome: string): Promise<string | undefined> {
  const text = await fs.readFile(operatorTokenPath(engramHome), 'utf8').catch(() => undefined);
  const token = text?.trim();
  return token && token.length >= 16 ? token : undefined;
}

/** Constant-time equality of a presented secret and the expected one. */
export function sameSecret(given: string, expected: string): boolean {
  const x = Buffer.from(given);
  const y = Buffer.from(expected);
  return x.length === y.length && timingSafeEqual(x, y);
}
