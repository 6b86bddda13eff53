import type { MemoryHeader } from '../memdir/scan.js';

// A realistic memory directory's headers (the kind extraction writes), newest first, for recall tests.

const BASE = Date.UTC(2026, 10, 20, 12, 0, 0);
const DAY = 86_400_000;

function h(
  filename: string,
  type: MemoryHeader['type'],
  name: string,
  description: string,
  ageDays: number,
): MemoryHeader {
  return {
    filename,
    filePath: `/mem/${filename}`,
    mtimeMs: BASE - ageDays * DAY,
    name,
    description,
    ...(type ? { type } : {}),
  };
}

export const REALISTIC_HEADERS: MemoryHeader[] = [
  h(
    'feedback_pnpm.md',
    'feedback',
    'Use pnpm',
    'The user wants pnpm, never npm, for installs and scripts in this repo',
    0,
  ),
  h(
    'feedback_db_tests.md',
    'feedback',
    'Integration tests hit a real database',
    'Never mock the database in integration tests; a mocked suite once hid a broken migration',
    1,
  ),
  h(
    'project_merge_freeze.md',
    'project',
    'Merge freeze',
    'Non-critical merges are frozen from 2026-03-05 while the mobile release branch is cut',
    3,
  ),
  h(
    'reference_grafana.md',
    'reference',
    'Latency dashboard',
    'The Grafana board "API latency" is what on-call watches for the checkout service',
    5,
  ),
  h(
    'user_role.md',
    'user',
    'Role',
    'Senior Go engineer, new to the React frontend; explain UI code with backend analogies',
    8,
  ),
  h(
    'reference_linear.md',
    'reference',
    'Ingest bugs',
    'Pipeline bugs are tracked in the Linear project INGEST',
    9,
  ),
  h(
    'project_auth_rewrite.md',
    'project',
    'Auth middleware rewrite',
    'The session-token middleware is being rewritten for legal compliance, not tech debt',
    12,
  ),
  h(
    'feedback_no_summaries.md',
    'feedback',
    'No trailing summaries',
    'Do not end replies with a summary of what was just done; the user reads the diff',
    15,
  ),
  h(
    'feedback_docker_gotcha.md',
    'feedback',
    'Docker compose gotcha',
    'docker compose up fails on this machine unless the redis volume is pruned first',
    20,
  ),
  h(
    'team/deploy.md',
    'project',
    'Deploy windows',
    'Production deploys only on Tuesdays and Thursdays after the staging soak',
    30,
  ),
  h('notes/legacy.md', undefined, 'legacy', 'Old scratch notes about the caching layer', 40),
  h('数据库.md', 'reference', '数据库迁移', '数据库迁移必须先在预发环境执行', 2),
];
