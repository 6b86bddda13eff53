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

export async function workersCommand(io: Output): Promise<number> {
  const config = loadWorkersConfig();
  const service = await startWorkers(config, undefined, { ownProcess: true });
  io.err(
    `engram workers: consuming ${[...service.workers.keys()].join(', ')}` +
      (service.http
        ? `; health ${service.http.url}/readyz, metrics ${service.http.url}/metrics, dashboard ${service.http.url}/dashboard`
        : ''),
  );
  const signal = await waitForSignal();
  await service.stop(signal);
  return EXIT.ok;
}
