import { describe, expect, it } from 'vitest';
import { installHooks, SettingsError, uninstallHooks } from './claude-code-settings.js';

const theirs = {
  model: 'opus',
  cleanupPeriodDays: 365,
  permissions: { allow: ['Bash(npm test:*)'] },
  hooks: {
    Stop: [{ hooks: [{ type: 'command', command: 'say done' }] }],
    PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: './guard.sh' }] }],
  },
};

describe('engram setup claude-code on settings.json', () => {
  it('adds the five hooks once, keeping every other setting and hook', () => {
    const first = installHooks(JSON.stringify(theirs));
    expect(first.events).toEqual(['SessionStart', 'UserPromptSubmit', 'Stop', 'PreCompact', 'SessionEnd']);
    const s = JSON.parse(first.text);
    expect(s.model).toBe('opus');
    expect(s.permissions).toEqual(theirs.permissions);
    expect(s.hooks.PreToolUse).toEqual(theirs.hooks.PreToolUse);
    expect(s.hooks.Stop[0]).toEqual(theirs.hooks.Stop[0]);
    expect(s.hooks.Stop[1].hooks[0].command).toBe('engram hook Stop');
    const again = installHooks(first.text);
    expect(again).toEqual({ text: first.text, changed: false, events: [] });
  });

  it('uninstall removes only what it added, and restores the original settings', () => {
    const installed = installHooks(JSON.stringify(theirs)).text;
    const removed = uninstallHooks(installed);
    expect(JSON.parse(removed.text)).toEqual(theirs);
    expect(uninstallHooks(removed.text).changed).toBe(false);
    // A hook someone else wrote that merely mentions engram stays.
    const other = JSON.stringify({
      hooks: { Stop: [{ hooks: [{ type: 'command', command: 'engram hook Stop --x' }] }] },
    });
    expect(uninstallHooks(other).changed).toBe(false);
  });

  it('starts from a missing or empty file, and refuses a broken one without touching it', () => {
    expect(JSON.parse(installHooks('').text).hooks.SessionEnd).toHaveLength(1);
    expect(() => installHooks('{ not json')).toThrow(SettingsError);
    expect(() => installHooks('[]')).toThrow(/not a JSON object/);
  });
});
