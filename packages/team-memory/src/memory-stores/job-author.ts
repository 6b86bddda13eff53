// Worker authorship on the Memory Stores API: a request may name the worker job it writes for (extraction,
// consolidation) in this header; the host records it in the version's `created_by` as `job`, beside the
// authenticated key (docs/memory-stores.md "Worker authorship"). It annotates the caller's own actor only.

export const JOB_AUTHOR_HEADER = 'x-engram-job';
/** `<job kind>:<job id>`, e.g. `extract:42` or `dream:7`. */
export const JOB_AUTHOR_PATTERN = /^[a-z][a-z-]{0,31}:[A-Za-z0-9._:-]{1,128}$/;

export type ApiActor = { type: 'api_actor'; api_key_id: string; job?: string };

/**
 * The actor a request authenticated as `tenantId` writes as: its key's `api_actor`, plus the job its
 * `x-engram-job` header names. A malformed header is refused (the host answers 400 with `message`).
 */
export function memoryStoreActor(
  tenantId: string,
  jobHeader: string | null | undefined,
): { ok: true; actor: ApiActor } | { ok: false; message: string } {
  const actor: ApiActor = { type: 'api_actor', api_key_id: `apikey_${tenantId}` };
  if (jobHeader === undefined || jobHeader === null) return { ok: true, actor };
  if (!JOB_AUTHOR_PATTERN.test(jobHeader))
    return {
      ok: false,
      message: `${JOB_AUTHOR_HEADER} must be <job kind>:<job id> (${JOB_AUTHOR_PATTERN.source}).`,
    };
  return { ok: true, actor: { ...actor, job: jobHeader } };
}
