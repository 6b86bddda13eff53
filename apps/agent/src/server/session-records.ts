import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { createExclusive } from '@engram/fs-atomic/atomic-write';
import { sessionId as sessionIdSchema } from '@engram/queue/jobs/common';
import type { Tenant } from '@engram/tenants/tenant-store';
import { z } from 'zod';

// An API session: created by POST /v1/sessions, it pins the session's cwd (checked inside the tenant's
// workspace when created and again at every turn). Its record lives in the tenant's own sessions directory,
// so a session id is resolved only among the authenticated tenant's sessions: another tenant's id is simply
// not found. Records are written once (exclusive create) and never change.

const sessionRecord = z.object({
  id: sessionIdSchema,
  tenant: z.string(),
  cwd: z.string(),
  createdAt: z.iso.datetime(),
});
export type SessionRecord = z.infer<typeof sessionRecord>;

/** The session id from a URL, or the reason it is not one (the caller answers 400 with it). */
export function parseSessionId(raw: string): { ok: true; id: string } | { ok: false; message: string } {
  const parsed = sessionIdSchema.safeParse(raw);
  if (parsed.success) return { ok: true, id: parsed.data };
  const shown = raw.length > 40 ? `${raw.slice(0, 40)}… (${raw.length} characters)` : JSON.stringify(raw);
  return {
    ok: false,
    message: `Invalid session id ${shown}: ${parsed.error.issues[0]?.message ?? 'malformed'} (1–128 characters). Use the id POST /v1/sessions returned.`,
  };
}

export async function createSessionRecord(tenant: Tenant, cwd: string): Promise<SessionRecord> {
  const record: SessionRecord = {
    id: randomUUID(),
    tenant: tenant.id,
    cwd,
    createdAt: new Date().toISOString(),
  };
  const created = await createExclusive(
    join(tenant.sessionsDir, `${record.id}.json`),
    `${JSON.stringify(record)}\n`,
    { mode: 0o600, dirMode: 0o700 },
  );
  if (!created) throw new Error('session id collision');
  return record;
}

export async function readSessionRecord(tenant: Tenant, id: string): Promise<SessionRecord | undefined> {
  let raw: string;
  try {
    raw = await fs.readFile(join(tenant.sessionsDir, `${id}.json`), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const parsed = sessionRecord.safeParse(JSON.parse(raw));
  if (!parsed.success || parsed.data.tenant !== tenant.id || parsed.data.id !== id) return undefined;
  return parsed.data;
}
