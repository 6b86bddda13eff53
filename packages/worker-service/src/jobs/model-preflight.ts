import { PermanentJobError } from '@engram/queue/worker';

// Before a job that snapshots or locks anything, make sure the model can answer at all: a consolidation whose
// model is unreachable would otherwise take its snapshot, retry for a minute and leave empty snapshots behind.
// One cheap request (list one model): no key and no endpoint, a refused connection, a DNS failure, a timeout or
// a rejected key fails the job at once, with what to do.

export interface ModelEndpoint {
  apiKey: string | undefined;
  baseURL: string | undefined;
}

const DEFAULT_BASE = 'https://api.anthropic.com';

/** Neither a key nor an endpoint: a request would go, keyless, to the default API host and fail there. */
export function isModelConfigured(endpoint: ModelEndpoint): boolean {
  return !!endpoint.apiKey || !!endpoint.baseURL;
}

/** The one reason a memory job gives when the workers have no model (permanent: no retry can fix it). */
export function modelNotConfigured(): PermanentJobError {
  return new PermanentJobError(
    'MODEL_NOT_CONFIGURED',
    'no model configured: the workers have no ANTHROPIC_API_KEY and no ANTHROPIC_BASE_URL; set one where the ' +
      'workers run (or start `engram dev --scripted-model`) and try again. Nothing was changed.',
  );
}

export async function assertModelReachable(endpoint: ModelEndpoint, timeoutMs = 5_000): Promise<void> {
  if (!isModelConfigured(endpoint)) throw modelNotConfigured();
  const base = (endpoint.baseURL ?? DEFAULT_BASE).replace(/\/+$/, '');
  let status: number;
  try {
    const res = await fetch(`${base}/v1/models?limit=1`, {
      headers: { 'x-api-key': endpoint.apiKey ?? '', 'anthropic-version': '2023-06-01' },
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    await res.body?.cancel().catch(() => undefined);
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new PermanentJobError(
      'MODEL_UNREACHABLE',
      `the model at ${base} is unreachable (${why}); nothing was changed. Check ANTHROPIC_BASE_URL and the ` +
        'network where the workers run, then try again.',
    );
  }
  if (status === 401 || status === 403) {
    throw new PermanentJobError(
      'MODEL_AUTH',
      `the model at ${base} rejected the workers' API key (HTTP ${status}); nothing was changed. Check ANTHROPIC_API_KEY.`,
    );
  }
}
