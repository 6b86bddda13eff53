// Polling helpers for integration tests: wait for a condition (never for a fixed time), with a message that
// names what did not happen.

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Treat a check that throws (e.g. a server mid-restart) as "not yet" instead of failing. */
  ignoreErrors?: boolean;
}

export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  what: string,
  options: WaitOptions = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  while (Date.now() < deadline) {
    const ok = options.ignoreErrors
      ? await Promise.resolve()
          .then(check)
          .catch(() => false)
      : await check();
    if (ok) return;
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

interface JobSource<J> {
  getJobState(jobId: string): Promise<string>;
  getJob(jobId: string): Promise<J | undefined>;
}

/** Resolves with the job once it is completed or failed, read after its final state is visible. */
export async function waitForFinishedJob<J>(
  queue: JobSource<J>,
  jobId: string,
  timeoutMs = 15_000,
): Promise<J> {
  let job: J | undefined;
  await waitUntil(
    async () => {
      const state = await queue.getJobState(jobId);
      // Fetched after the state says final: a job read before that would carry no return value yet.
      if (state !== 'completed' && state !== 'failed') return false;
      job = await queue.getJob(jobId);
      return job !== undefined;
    },
    `job ${jobId} to finish`,
    { timeoutMs, intervalMs: 20 },
  );
  return job!;
}
