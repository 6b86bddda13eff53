import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { claudeHome } from './claude-home.js';

// The lean entry of `engram hook <event>` (bin/engram.js routes `hook` here before loading the CLI): Claude
// Code waits for every hook, so the foreground loads nothing but Node's own modules until it knows there is
// work. Stop, PreCompact and SessionEnd answer nothing to Claude Code: their work (waiting for the turn's last
// entries, enqueueing) is handed to a detached background process at once, so Claude Code finishes writing
// the transcript meanwhile instead of waiting for the hook. UserPromptSubmit answers only when there is a
// prompt worth a recall; a one-word or empty prompt ends here. Everything else loads `hook.ts` as before.
// Set ENGRAM_HOOK_FOREGROUND=1 to run every event in the foreground (debugging).

const EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop', 'PreCompact', 'SessionEnd'] as const;
const BACKGROUND_EVENTS = new Set(['Stop', 'PreCompact', 'SessionEnd']);
export const BACKGROUND_FLAG = '--engram-background';

/** Where a background hook says what it did (its stdio is detached from Claude Code). */
export function hookLogPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.ENGRAM_HOOK_LOG || join(env.ENGRAM_HOME || claudeHome(env), 'engram-hooks.log');
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** The prompt of a UserPromptSubmit input, without validating the rest (the full path does that). */
function promptOf(inputText: string): string | undefined {
  try {
    const value = JSON.parse(inputText) as { prompt?: unknown };
    return typeof value.prompt === 'string' ? value.prompt : undefined;
  } catch {
    return undefined;
  }
}

function entryScript(): string {
  const self = fileURLToPath(import.meta.url);
  return join(self, '..', '..', 'bin', `engram-hook${self.endsWith('.ts') ? '.ts' : '.js'}`);
}

/** Starts the detached process that does `event`'s work with `inputText`; resolves once the input is handed over. */
function handToBackground(event: string, inputText: string): Promise<number | undefined> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [...process.execArgv, entryScript(), event, BACKGROUND_FLAG], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
      env: process.env,
    });
    child.on('error', () => done(undefined));
    child.stdin.on('error', () => {});
    child.stdin.end(inputText, () => {
      child.unref();
      done(child.pid);
    });
  });
}

/**
 * `engram hook <event> [--engram-background]`: the exit code is always 0 (exit 2 would drop the prompt or
 * loop the turn).
 */
export async function hookMain(
  args: readonly string[],
  io: { stdin: NodeJS.ReadableStream; out(text: string): void; err(text: string): void } = {
    stdin: process.stdin,
    out: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
    err: (t) => process.stderr.write(t.endsWith('\n') ? t : `${t}\n`),
  },
): Promise<number> {
  const event = args[0] ?? '';
  const background = args.includes(BACKGROUND_FLAG);
  if (!(EVENTS as readonly string[]).includes(event)) {
    // An unknown event is Claude Code's newer protocol, not the person's mistake: say so, never block.
    io.err(`engram hook: no handler for ${event || '(none)'}; nothing done.`);
    return 0;
  }
  const inputText = await readAll(io.stdin);
  if (!background && BACKGROUND_EVENTS.has(event) && process.env.ENGRAM_HOOK_FOREGROUND !== '1') {
    const pid = await handToBackground(event, inputText);
    if (pid !== undefined) {
      io.err(
        `engram hook ${event}: handed to a background process (pid ${pid}); it logs to ${hookLogPath()}`,
      );
      return 0;
    }
    // Could not start one: do the work here.
  }
  if (event === 'UserPromptSubmit') {
    const prompt = promptOf(inputText)?.trim();
    // The prefetch's own skip rules (recall/prefetch.ts prefetchSkipReason), checked before anything loads.
    if (prompt !== undefined && (prompt === '' || !/\s/.test(prompt))) return 0;
  }
  // SessionStart's only work is the team pull, configured by ENGRAM_TEAM_SYNC_URL (config.ts).
  if (event === 'SessionStart' && !process.env.ENGRAM_TEAM_SYNC_URL) return 0;
  const lines: string[] = [];
  const sink = background
    ? { out: () => {}, err: (t: string) => lines.push(t.trimEnd()) }
    : { out: io.out, err: io.err };
  try {
    const { loadAgentConfig } = await import('../config.js');
    const { hookCommand } = await import('./hook.js');
    let cfg: Awaited<ReturnType<typeof loadAgentConfig>>;
    try {
      // Hooks serve Claude Code: its config directory is the memory home unless ENGRAM_HOME says otherwise.
      cfg = loadAgentConfig({ ...process.env, ENGRAM_HOME: process.env.ENGRAM_HOME || claudeHome() });
    } catch (error) {
      sink.err(`engram hook ${event}: ${(error as Error).message}; nothing done.`);
      return 0;
    }
    await hookCommand(cfg, event as (typeof EVENTS)[number], inputText, sink);
  } catch (error) {
    sink.err(`engram hook ${event}: ${(error as Error).message}; nothing done.`);
  } finally {
    if (background && lines.length) {
      try {
        appendFileSync(hookLogPath(), `${new Date().toISOString()} ${lines.join(' | ')}\n`);
      } catch {}
    }
  }
  return 0;
}
