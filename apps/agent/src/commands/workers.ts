import { loadWorkersConfig } from '@engram/worker-service/config';
import { startWorkers } from '@engram/worker-service/start';
import { EXIT, type Output } from './output.js';

// `engram workers`: the worker service in this process, until Ctrl-C / SIGTERM.

export function waitForSignal(): Promise<string> {
  return new Promise((resolve) => {
    const done = (signal: string) => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      resolve(signal);
    };
    const onInt = () => done('SIGINT');
    const onTerm = () => done('SIGTERM');
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onTerm);
  });
}

/** Where the token of the dashboard, the memory browser and /metrics' per-tenant series is. */
export function dashboardAccess(tokenFile: string | undefined): string {
  return tokenFile
    ? `dashboard, memory browser and per-tenant metrics need the token in ${tokenFile} (Bearer or ?token=)`
    : 'dashboard, memory browser and per-tenant metrics need ENGRAM_DASHBOARD_TOKEN (or the basic-auth user)';
}

export async function workersCommand(io: Output): Promise<number> {
  const config = loadWorkersConfig();
  const service = await startWorkers(config, undefined, { ownProcess: true });
  io.err(
    `engram workers: consuming ${[...service.workers.keys()].join(', ')}` +
      (service.http
        ? `; health ${service.http.url}/readyz, metrics ${service.http.url}/metrics, dashboard ${service.http.url}/dashboard`
        : ''),
  );
  if (service.http) io.err(`engram workers: ${dashboardAccess(service.dashboardTokenFile)}`);
  const signal = await waitForSignal();
  await service.stop(signal);
  return EXIT.ok;
}
