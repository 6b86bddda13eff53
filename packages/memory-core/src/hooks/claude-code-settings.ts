import { EngramError } from '@engram/errors/engram-error';
import { HOOK_EVENTS } from './claude-code-hook.js';

// `engram setup claude-code`: Engram's hooks in Claude Code's settings.json, without the plugin. Pure: text in,
// text out. Every other setting and hook is kept as it was; only hook commands Engram itself writes
// (`engram hook <Event>`) are ever added or removed, so uninstalling never takes a hook someone else added.

export const HOOK_COMMAND = (event: string) => `engram hook ${event}`;

interface HookCommand {
  type?: string;
  command?: string;
  [k: string]: unknown;
}
interface HookMatcher {
  matcher?: string;
  hooks?: HookCommand[];
  [k: string]: unknown;
}
type Settings = Record<string, unknown> & { hooks?: Record<string, HookMatcher[]> };

export class SettingsError extends EngramError {
  constructor(message: string) {
    super('INVALID_SETTINGS', message, { retryable: false });
  }
}

function parse(text: string): Settings {
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new SettingsError(`settings.json is not JSON (${(e as Error).message}); left as it is`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new SettingsError('settings.json is not a JSON object; left as it is');
  const hooks = (value as Settings).hooks;
  if (hooks !== undefined && (typeof hooks !== 'object' || hooks === null || Array.isArray(hooks)))
    throw new SettingsError('settings.json "hooks" is not an object; left as it is');
  return value as Settings;
}

const isOurs = (event: string, h: HookCommand) => h.command === HOOK_COMMAND(event);

export interface SettingsChange {
  text: string;
  changed: boolean;
  events: string[];
}

/** Adds `engram hook <Event>` for each event that lacks it; idempotent (unchanged text when all are there). */
export function installHooks(text: string): SettingsChange {
  const settings = parse(text);
  const hooks = settings.hooks ?? {};
  const added: string[] = [];
  for (const event of HOOK_EVENTS) {
    const matchers = Array.isArray(hooks[event]) ? hooks[event]! : [];
    if (matchers.some((m) => (m.hooks ?? []).some((h) => isOurs(event, h)))) continue;
    matchers.push({ hooks: [{ type: 'command', command: HOOK_COMMAND(event), timeout: 30 }] });
    hooks[event] = matchers;
    added.push(event);
  }
  if (added.length === 0) return { text, changed: false, events: [] };
  settings.hooks = hooks;
  return { text: `${JSON.stringify(settings, null, 2)}\n`, changed: true, events: added };
}

/** Removes only Engram's own hook commands; matchers and events left empty by that go too. */
export function uninstallHooks(text: string): SettingsChange {
  const settings = parse(text);
  const hooks = settings.hooks;
  if (!hooks) return { text, changed: false, events: [] };
  const removed: string[] = [];
  for (const [event, matchers] of Object.entries(hooks)) {
    if (!Array.isArray(matchers)) continue;
    let touched = false;
    const kept: HookMatcher[] = [];
    for (const m of matchers) {
      const before = m.hooks ?? [];
      const after = before.filter((h) => !isOurs(event, h));
      if (after.length === before.length) kept.push(m);
      else {
        touched = true;
        if (after.length > 0) kept.push({ ...m, hooks: after });
      }
    }
    if (!touched) continue;
    removed.push(event);
    if (kept.length > 0) hooks[event] = kept;
    else delete hooks[event];
  }
  if (removed.length === 0) return { text, changed: false, events: [] };
  if (Object.keys(hooks).length === 0) delete settings.hooks;
  return { text: `${JSON.stringify(settings, null, 2)}\n`, changed: true, events: removed };
}
