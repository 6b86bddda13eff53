import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { TeamMemoryHttpClient } from '@engram/team-memory/client/http-client';
import { CONFLICTS_DIRNAME, type SkippedFile } from '@engram/team-memory/client/local-files';
import { type TeamProtocol, teamProtocolFor } from '@engram/team-memory/client/protocol';
import { repoIdentityOf } from '@engram/team-memory/client/repo-identity';
import {
  memoryHistory,
  memoryStoreClient,
  STORE_SYNC_STATE_FILENAME,
  StoreSyncStateFile,
  type StoreSyncTarget,
  syncTeamStore,
  teamStoreStatus,
} from '@engram/team-memory/client/store-sync';
import {
  type PullReport,
  type PushReport,
  pullTeamMemory,
  pushTeamMemory,
  type SyncTarget,
  teamSyncStatus,
} from '@engram/team-memory/client/sync';
import { TEAM_SYNC_STATE_FILENAME, TeamSyncStateFile } from '@engram/team-memory/client/sync-state';
import { type AgentConfig, AgentConfigError } from '../config.js';
import { EXIT, type Output } from './output.js';

// `engram team status|pull|push`: team memory sync for people. It runs the same pull and push the workers run,
// in this process, and says what changed, what was skipped and why.

export interface TeamOptions {
  cwd: string;
  json: boolean;
}

/** Where a project's protocol comes from: for the CLI (no tenant), the deployment's ENGRAM_TEAM_MEMORY_STORE. */
interface Binding {
  source: 'deployment' | 'none';
  /** The binding's key: the repository, or `all` for a bare store id. */
  key?: string;
}

type Target = SyncTarget & {
  teamDirShown: string;
  protocol: TeamProtocol;
  binding: Binding;
  store?: StoreSyncTarget;
};

async function targetFor(config: AgentConfig, cwd: string): Promise<Target> {
  const sync = config.teamSync;
  if (!sync?.apiKey) {
    throw new AgentConfigError(
      'Team memory sync is not configured: set ENGRAM_TEAM_SYNC_URL (the service) and ENGRAM_TEAM_SYNC_KEY (your tenant API key).',
    );
  }
  const paths = await resolveEngramPaths({
    engramHome: config.engramHome,
    cwd,
    ...(config.memoryDirOverride ? { memoryDirOverride: config.memoryDirOverride } : {}),
  });
  const identity = await repoIdentityOf(paths.projectRoot);
  if (!identity.ok) {
    throw new AgentConfigError(
      `Team memory is scoped to a git repository, and ${paths.projectRoot} has none usable: ${identity.reason}. ` +
        'Add an origin remote (e.g. git remote add origin git@github.com:owner/name.git).',
    );
  }
  const protocol = teamProtocolFor(sync.stores, identity.repo);
  const binding: Binding =
    protocol.kind === 'team-memory'
      ? { source: 'none' }
      : {
          source: 'deployment',
          key: sync.stores.byRepo[identity.repo.toLowerCase()] ? identity.repo.toLowerCase() : 'all',
        };
  const store: StoreSyncTarget | undefined =
    protocol.kind === 'memory-store'
      ? {
          teamDir: paths.teamDir,
          storeId: protocol.storeId,
          repo: identity.repo,
          client: memoryStoreClient({ baseUrl: sync.url, apiKey: sync.apiKey, maxRetries: 1 }),
          state: new StoreSyncStateFile(join(paths.projectDir, STORE_SYNC_STATE_FILENAME)),
        }
      : undefined;
  return {
    protocol,
    binding,
    ...(store ? { store } : {}),
    teamDir: paths.teamDir,
    teamDirShown: paths.teamDir,
    repo: identity.repo,
    http: new TeamMemoryHttpClient({ baseUrl: sync.url, apiKey: sync.apiKey, maxRetries: 1 }),
    state: new TeamSyncStateFile(join(paths.projectDir, TEAM_SYNC_STATE_FILENAME)),
  };
}

export async function teamStatus(config: AgentConfig, opts: TeamOptions, io: Output): Promise<number> {
  const target = await targetFor(config, opts.cwd);
  if (target.store) return storeStatus(target, target.store, opts, io);
  const status = await teamSyncStatus(target);
  if (opts.json) {
    io.out(
      JSON.stringify({
        teamDir: target.teamDirShown,
        protocol: 'team-memory',
        binding: target.binding,
        ...status,
      }),
    );
    return status.remoteError ? EXIT.failure : EXIT.ok;
  }
  io.out(`Team memory for ${status.repo} (${target.teamDirShown})`);
  io.out('  protocol: team-memory (/api/claude_code/team_memory; no memory store bound)');
  io.out(
    `  ${status.local} local file${status.local === 1 ? '' : 's'}; last pull ${status.lastPullAt ?? 'never'}; last push ${status.lastPushAt ?? 'never'}`,
  );
  if (status.remoteError)
    io.out(`  service: unreachable (${status.remoteError}); comparing with the last sync`);
  // Conflicts first: they are what a pull would overwrite (keeping the local version aside).
  for (const k of status.conflicts)
    io.out(
      `  conflict ${k}: changed here and on the service; a pull writes the service's version and keeps yours in ${join(target.teamDirShown, CONFLICTS_DIRNAME)}/ (push first to make yours win)`,
    );
  io.out(`  to push (${status.toPush.length}): ${status.toPush.join(', ') || '—'}`);
  io.out(`  to pull (${status.toPull.length}): ${status.toPull.join(', ') || '—'}`);
  for (const copy of status.conflictCopies)
    io.out(`  conflict copy ${join(target.teamDirShown, copy)} (an earlier pull kept your version here)`);
  for (const line of skippedLines(status.skipped)) io.out(`  ${line}`);
  if (status.suppressed) {
    io.out(
      `  pushes suppressed since ${status.suppressed.at}: ${status.suppressed.message} ` +
        '(changing a team file lifts it; `engram team push` tries anyway)',
    );
  }
  return status.remoteError ? EXIT.failure : EXIT.ok;
}

export async function teamPull(config: AgentConfig, opts: TeamOptions, io: Output): Promise<number> {
  const target = await targetFor(config, opts.cwd);
  if (target.store) return storeSync(target.store, target.teamDirShown, opts, io);
  const report = await pullTeamMemory(target, { skipEtagCache: true });
  if (opts.json) io.out(JSON.stringify(report));
  else for (const line of describePull(report, target.teamDirShown)) io.out(line);
  return EXIT.ok;
}

export async function teamPush(config: AgentConfig, opts: TeamOptions, io: Output): Promise<number> {
  const target = await targetFor(config, opts.cwd);
  // A person asking to push sends what the store refused before too (they may have fixed it).
  if (target.store) return storeSync({ ...target.store, retryRefused: true }, target.teamDirShown, opts, io);
  // A person asking to push overrides a suppression (they may have fixed what the service refused).
  const report = await pushTeamMemory(target, { force: true });
  if (opts.json) io.out(JSON.stringify(report));
  else for (const line of describePush(report)) io.out(line);
  return report.outcome === 'failed' ? EXIT.failure : EXIT.ok;
}

async function storeStatus(
  target: Target,
  store: StoreSyncTarget,
  opts: TeamOptions,
  io: Output,
): Promise<number> {
  const status = await teamStoreStatus(store);
  if (opts.json) {
    io.out(
      JSON.stringify({
        teamDir: target.teamDirShown,
        protocol: 'memory-store',
        binding: target.binding,
        repo: target.repo,
        ...status,
      }),
    );
    return status.remoteError ? EXIT.failure : EXIT.ok;
  }
  io.out(`Team memory for ${target.repo} (${target.teamDirShown})`);
  io.out(
    `  protocol: memory-store ${status.storeId} (bound by ENGRAM_TEAM_MEMORY_STORE: ${target.binding.key ?? 'all'})`,
  );
  io.out(
    `  ${status.local} local file${status.local === 1 ? '' : 's'}; last sync ${status.lastSyncAt ?? 'never'}`,
  );
  if (status.remoteError) io.out(`  store: unreachable (${status.remoteError})`);
  for (const k of status.conflicts)
    io.out(
      `  conflict ${k}: changed here and in the store; a sync writes the store's version and keeps yours in ${join(target.teamDirShown, CONFLICTS_DIRNAME)}/`,
    );
  io.out(`  to push (${status.toPush.length}): ${status.toPush.join(', ') || '—'}`);
  io.out(`  to pull (${status.toPull.length}): ${status.toPull.join(', ') || '—'}`);
  for (const p of status.pendingDeletes)
    io.out(`  deleted here ${p.key}: the store's copy is deleted by a sync from ${p.dueAt} on if still gone`);
  for (const r of status.refused)
    io.out(`  refused ${r.key}: ${r.detail}; not sent again until it changes (engram team push retries)`);
  for (const m of status.foreignMounts)
    io.out(
      `  ${m.dir}/: ${m.client === 'claude-code' ? "Claude Code's" : "the SDK's"} mirror of a memory store; read as memory, never synced from here`,
    );
  for (const copy of status.conflictCopies) io.out(`  conflict copy ${join(target.teamDirShown, copy)}`);
  for (const line of skippedLines(status.skipped)) io.out(`  ${line}`);
  return status.remoteError ? EXIT.failure : EXIT.ok;
}

/** `engram team pull|push` on a store-backed project: one sync pass, both ways. */
async function storeSync(
  store: StoreSyncTarget,
  teamDir: string,
  opts: TeamOptions,
  io: Output,
): Promise<number> {
  const r = await syncTeamStore(store);
  if (opts.json) {
    io.out(JSON.stringify(r));
    return EXIT.ok;
  }
  io.out(
    `Synced with memory store ${r.storeId}: ${r.uploaded.length} uploaded, ${r.downloaded.length} downloaded, ${r.deleted.length} deleted, ${r.unchanged} unchanged.`,
  );
  for (const u of r.uploaded) io.out(`  pushed   ${u.key}`);
  for (const d of r.downloaded) io.out(`  ${d.change.padEnd(8)} ${d.key}`);
  for (const d of r.deleted) io.out(`  deleted  ${d.key} (${d.where === 'store' ? 'in the store' : 'here'})`);
  for (const p of r.pendingDeletes)
    io.out(`  pending  ${p.key}: deleted here; the store's copy is deleted by a sync from ${p.dueAt} on`);
  for (const c of r.conflicts)
    io.out(`  conflict ${c.key}: the store's version was written, yours is kept in ${join(teamDir, c.copy)}`);
  for (const s of r.skipped)
    io.out(`  skipped  ${JSON.stringify(s.key)}: ${s.reason}${s.detail ? ` (${s.detail})` : ''}`);
  return EXIT.ok;
}

/** `engram memory history <file>`: the versions a memory store holds of one store-backed team file. */
export async function memoryHistoryCommand(
  config: AgentConfig,
  opts: TeamOptions & { file: string },
  io: Output,
): Promise<number> {
  const target = await targetFor(config, opts.cwd);
  if (!target.store) {
    io.err(
      `${opts.file}: history is kept for store-backed team files only, and ${target.repo} syncs with the team-memory protocol (set ENGRAM_TEAM_MEMORY_STORE).`,
    );
    return EXIT.usage;
  }
  const memoryDir = dirname(target.teamDir);
  const abs = resolve(memoryDir, opts.file);
  const key = relative(target.teamDir, abs).split(sep).join('/');
  if (!key || key.startsWith('..') || isAbsolute(key)) {
    io.err(
      `${opts.file}: not a file of the team directory ${target.teamDirShown} (history is kept for team files).`,
    );
    return EXIT.usage;
  }
  const h = await memoryHistory(target.store.client, target.store.storeId, key);
  if (opts.json) {
    io.out(JSON.stringify({ file: key, storeId: target.store.storeId, ...h }));
    return EXIT.ok;
  }
  if (!h.memoryId) {
    io.out(`${key}: memory store ${target.store.storeId} has no versions of it (never synced).`);
    return EXIT.ok;
  }
  io.out(`${key} in memory store ${target.store.storeId} (${h.memoryId}), newest first:`);
  for (const v of h.versions) {
    const by = v.created_by as { type?: string; api_key_id?: string; job?: string } | null;
    const who = by
      ? `${by.job ? `job ${by.job} via ` : ''}${by.api_key_id ?? by.type ?? 'unknown'}`
      : 'unknown';
    const size = v.redacted ? 'redacted' : `${v.content_size_bytes ?? 0} bytes`;
    io.out(`  ${v.created_at}  ${v.operation.padEnd(8)} ${v.id}  ${size}  by ${who}`);
  }
  return EXIT.ok;
}

export function describePull(r: PullReport, teamDir?: string): string[] {
  const lines: string[] = [];
  if (r.outcome === 'no-data') lines.push(`The service has no team memory for ${r.repo} yet.`);
  else if (r.outcome === 'not-modified') lines.push(`Team memory for ${r.repo} is up to date.`);
  else {
    lines.push(
      `Pulled ${r.repo}: ${r.written.length} written, ${r.unchanged} unchanged${r.keptLocal.length ? `, ${r.keptLocal.length} local edit(s) kept` : ''}.`,
    );
  }
  for (const w of r.written) lines.push(`  ${w.change.padEnd(8)} ${w.key}`);
  for (const k of r.keptLocal) lines.push(`  kept     ${k} (edited here; the next push sends it)`);
  for (const c of r.conflicts)
    lines.push(
      `  conflict ${c.key}: ${c.reason === 'no-base' ? 'differed from the service with no earlier sync' : 'changed here and on the service'}; the service's version was written, yours is kept in ${teamDir ? join(teamDir, c.copy) : c.copy}`,
    );
  for (const s of r.skipped)
    lines.push(
      `  skipped  ${JSON.stringify(s.key)}: ${pullSkipText(s.reason)}${s.detail ? ` (${s.detail})` : ''}`,
    );
  return lines;
}

export function describePush(r: PushReport): string[] {
  const lines: string[] = [];
  if (r.outcome === 'failed') lines.push(`Push of ${r.repo} failed: ${r.error?.message ?? 'unknown error'}`);
  else if (r.outcome === 'suppressed')
    lines.push(`Push of ${r.repo} is suppressed: ${r.error?.message ?? ''}`);
  else if (r.outcome === 'up-to-date')
    lines.push(`Team memory for ${r.repo} is up to date; nothing to push.`);
  else {
    lines.push(
      `Pushed ${r.pushed.length} file${r.pushed.length === 1 ? '' : 's'} to ${r.repo} in ${r.batches} request${r.batches === 1 ? '' : 's'}${r.conflicts ? ` (${r.conflicts} conflict${r.conflicts === 1 ? '' : 's'} resolved by retrying)` : ''}.`,
    );
  }
  for (const p of r.pushed) lines.push(`  pushed   ${p.key}`);
  for (const line of skippedLines(r.skipped)) lines.push(`  ${line}`);
  return lines;
}

function skippedLines(skipped: readonly SkippedFile[]): string[] {
  return skipped.map((s) => {
    switch (s.reason) {
      case 'secret':
        return `skipped  ${s.key}: contains what looks like a secret (${s.label ?? s.ruleId}, rule ${s.ruleId}); it is never uploaded — remove it`;
      case 'too-large':
        return `skipped  ${s.key}: ${s.bytes} bytes, over the 250000-byte limit per entry`;
      case 'invalid-key':
        return `skipped  ${JSON.stringify(s.key)}: the file name cannot be a team memory key (${s.code})`;
      case 'not-utf8':
        return `skipped  ${s.key}: not UTF-8 text`;
      case 'too-many-files':
        return `skipped  ${s.key}: over the service's entry limit`;
      default:
        return `skipped  ${s.key}: unreadable (${s.code ?? 'error'})`;
    }
  });
}

function pullSkipText(reason: PullReport['skipped'][number]['reason']): string {
  switch (reason) {
    case 'invalid-key':
      return 'refused key (it could escape the team directory)';
    case 'too-large':
      return 'over the 250000-byte limit per entry';
    case 'outside-team-dir':
      return 'would land outside the team directory';
    default:
      return 'could not be written';
  }
}
