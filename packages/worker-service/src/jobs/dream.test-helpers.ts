import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONSOLIDATION_PROMPT_TITLE } from '@engram/memory-core/dream/consolidation-prompt';

// Fixtures for the dream worker tests: a memory directory with two duplicate memories, transcripts of
// "other sessions", and the request matcher for consolidation forks.

/** True for requests of a consolidation fork (its instruction carries the prompt's title). */
export function isDreamRequest(body: { messages: Array<{ role: string; content: unknown }> }): boolean {
  return JSON.stringify(body.messages).includes(CONSOLIDATION_PROMPT_TITLE);
}

const memory = (name: string, description: string, type: string, body: string) =>
  `---\nname: ${name}\ndescription: ${description}\ntype: ${type}\n---\n${body}\n`;

export const DREAM_SEED: Record<string, string> = {
  'MEMORY.md':
    '- [Use pnpm](feedback_pnpm.md) — pnpm, not npm\n- [Prefer pnpm](feedback_pnpm_again.md) — pnpm again\n' +
    '- [Deploy freeze](project_deploy.md) — no Friday deploys\n- [Role](user_role.md) — Go backend dev\n',
  'feedback_pnpm.md': memory(
    'Use pnpm',
    'The user wants pnpm instead of npm for installs',
    'feedback',
    'Always use pnpm.\n\n**Why:** npm breaks workspace links.\n**How to apply:** pnpm install.',
  ),
  'feedback_pnpm_again.md': memory(
    'Prefer pnpm',
    'User prefers pnpm over npm for installs and scripts',
    'feedback',
    'pnpm, never npm.\n\n**Why:** said again on 2026-11-28.\n**How to apply:** pnpm test.',
  ),
  'project_deploy.md': memory(
    'Deploy freeze',
    'No deploys on Fridays after the March outage',
    'project',
    'No Friday deploys.\n\n**Why:** the March outage.\n**How to apply:** schedule releases Mon–Thu.',
  ),
  'user_role.md': memory('Role', 'Backend developer, ten years of Go', 'user', 'Go backend developer.'),
};

/** Writes DREAM_SEED into `memoryDir` with an old mtime; returns it. */
export function seedDreamMemories(memoryDir: string): Record<string, string> {
  mkdirSync(memoryDir, { recursive: true });
  const old = new Date('2026-10-01T00:00:00Z');
  for (const [file, content] of Object.entries(DREAM_SEED)) {
    writeFileSync(join(memoryDir, file), content);
    utimesSync(join(memoryDir, file), old, old);
  }
  return { ...DREAM_SEED };
}

/** Creates `<id>.jsonl` transcripts touched at `mtimeMs` (what the session gate counts). */
export function seedSessions(transcriptDir: string, ids: readonly string[], mtimeMs: number): void {
  mkdirSync(transcriptDir, { recursive: true });
  const at = new Date(mtimeMs);
  for (const id of ids) {
    const path = join(transcriptDir, `${id}.jsonl`);
    writeFileSync(path, '{}\n');
    utimesSync(path, at, at);
  }
}
