// Worker authorship on the Memory Stores API: a request may name the worker job it writes for (extraction,
// consolidation) in this header; the host records it in the version's `created_by` as `job`, beside the
// authenticated key (docs/memory-stores.md "Worker authorship"). It annotates the caller's own actor only.

export const JOB_AUTHOR_HEADER = 'x-engram-job';
/** `<job kind>:<job id>`, e.g. `extract:42` or `dream:7`. */
export const JOB_AUTHOR_PATTERN = /^[a-z][a-z-]{0,31}:[A-Za-z0-9._:-]{1,128}$/;
