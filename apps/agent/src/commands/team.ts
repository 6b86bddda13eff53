import { join } from 'node:path';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { TeamMemoryHttpClient } from '@engram/team-memory/client/http-client';
import { CONFLICTS_DIRNAME, type SkippedFile } from '@engram/team-memory/client/local-files';
import { repoIdentityOf } from '@engram/team-memory/client/repo-identity';
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

async function targetFor(config: AgentConfig, cwd: string): Promise<SyncTarget & { teamDirShown: string }> {
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
  return {
    teamDir: paths.teamDir,
    teamDirShown: paths.teamDir,
    repo: identity.repo,
    http: new TeamMemoryHttpClient({ baseUrl: sync.url, apiKey: sync.apiKey, maxRetries: 1 }),
    state: new TeamSyncStateFile(join(paths.projectDir, TEAM_SYNC_STATE_FILENAME)),
  };
}

export async function teamStatus(config: AgentConfig, opts: TeamOptions, io: Output): Promise<number> {
  const target = await targetFor(config, opts.cwd);
  const status = await teamSyncStatus(target);
  if (opts.json) {
    io.out(JSON.stringify({ teamDir: target.teamDirShown, ...status }));
    return status.remoteError ? EXIT.failure : EXIT.ok;
  }
  io.out(`Team memory for ${status.repo} (${target.teamDirShown})`);
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
  const report = await pullTeamMemory(target, { skipEtagCache: true });
  if (opts.json) io.out(JSON.stringify(report));
  else for (const line of describePull(report, target.teamDirShown)) io.out(line);
  return EXIT.ok;
}

export async function teamPush(config: AgentConfig, opts: TeamOptions, io: Output): Promise<number> {
  const target = await targetFor(config, opts.cwd);
  // A person asking to push overrides a suppression (they may have fixed what the service refused).
  const report = await pushTeamMemory(target, { force: true });
  if (opts.json) io.out(JSON.stringify(report));
  else for (const line of describePush(report)) io.out(line);
  return report.outcome === 'failed' ? EXIT.failure : EXIT.ok;
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
