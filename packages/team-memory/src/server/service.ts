import {
  type TeamMemoryEvent,
  type TeamMemoryLimits,
  type TeamMemoryRoute,
  teamMemoryRoutes,
} from './routes.js';
import { TeamMemoryStore } from './store.js';

// What a host needs to serve team memory: the store opened (and migrated) on a PostgreSQL URL, and the routes
// to mount behind the host's own authentication.

export interface TeamMemoryService {
  routes: TeamMemoryRoute[];
  store: TeamMemoryStore;
  close(): Promise<void>;
}

export async function openTeamMemoryService(opts: {
  databaseUrl: string;
  schema?: string;
  limits?: Partial<TeamMemoryLimits>;
  onEvent?: (event: TeamMemoryEvent) => void;
}): Promise<TeamMemoryService> {
  const store = await TeamMemoryStore.open({
    connectionString: opts.databaseUrl,
    ...(opts.schema ? { schema: opts.schema } : {}),
  });
  const routes = teamMemoryRoutes({
    store,
    ...(opts.limits ? { limits: opts.limits } : {}),
    ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
  });
  return { routes, store, close: () => store.close() };
}
