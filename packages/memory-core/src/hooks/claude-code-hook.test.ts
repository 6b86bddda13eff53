import { describe, expect, it } from 'vitest';
import {
  additionalContextOutput,
  hookSurfacedMemories,
  lastTurn,
  parseHookInput,
  pickStopLeaf,
  recallContext,
} from './claude-code-hook.js';

const input = {
  session_id: '0b4f6f1e-8a55-4f57-9d1c-2f0f5b0b1c11',
  transcript_path: '/home/a/.claude/projects/-home-a-repo/0b4f6f1e-8a55-4f57-9d1c-2f0f5b0b1c11.jsonl',
  cwd: '/home/a/repo',
  hook_event_name: 'Stop',
  stop_hook_active: false,
};

describe('Claude Code hook input', () => {
  it('accepts the event JSON Claude Code sends, keeping fields it does not know', () => {
    const r = parseHookInput(JSON.stringify(input), 'Stop');
    expect(r).toMatchObject({ ok: true, input: { session_id: input.session_id, stop_hook_active: false } });
  });

  it('says why bad input is refused: not JSON, a path-like session id, another event', () => {
    expect(parseHookInput('{', 'Stop')).toMatchObject({ ok: false, reason: /not JSON/ });
    const bad = parseHookInput(JSON.stringify({ ...input, session_id: '../x' }), 'Stop');
    expect(bad).toMatchObject({ ok: false, reason: /session_id/ });
    expect(parseHookInput(JSON.stringify(input), 'SessionEnd')).toMatchObject({
      ok: false,
      reason: 'hook input is for Stop, not SessionEnd',
    });
  });

  it('answers additional context in the hookSpecificOutput shape, and nothing when there is none', () => {
    expect(JSON.parse(additionalContextOutput('UserPromptSubmit', 'ctx'))).toEqual({
      hookSpecificOutput: { hookEventName: 'UserPromptSubmit', additionalContext: 'ctx' },
    });
    expect(additionalContextOutput('UserPromptSubmit', undefined)).toBe('');
  });
});

const user = (uuid: string, content: unknown) => ({ type: 'user', uuid, message: { role: 'user', content } });
const assistant = (uuid: string, content: unknown) => ({
  type: 'assistant',
  uuid,
  message: { role: 'assistant', content },
});

describe('the Stop leaf', () => {
  it('is the newest main-chain message, settled only when it is a reply asking for no tool', () => {
    const entries = [
      user('u1', 'hi'),
      assistant('a1', [{ type: 'tool_use', id: 't', name: 'Read', input: {} }]),
      { type: 'system', uuid: 's1', subtype: 'turn_duration' },
      { type: 'last-prompt' },
    ];
    expect(pickStopLeaf(entries)).toEqual({ leafUuid: 'a1', leafSeq: 2, settled: false });
    entries.push(user('u2', [{ type: 'tool_result', tool_use_id: 't', content: 'x' }]));
    entries.push(assistant('a2', [{ type: 'text', text: 'done' }]));
    entries.push({ ...assistant('side', [{ type: 'text', text: 'x' }]), isSidechain: true } as never);
    expect(pickStopLeaf(entries)).toEqual({ leafUuid: 'a2', leafSeq: 6, settled: true });
    expect(pickStopLeaf([{ type: 'summary' }])).toBeUndefined();
  });

  it('the last turn starts at the newest typed prompt, not at a tool result', () => {
    const chain = [
      user('u1', 'first'),
      assistant('a1', [{ type: 'text', text: 'ok' }]),
      user('u2', [{ type: 'text', text: 'second' }]),
      assistant('a2', [{ type: 'tool_use', id: 't', name: 'Write', input: {} }]),
      user('u3', [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }]),
    ];
    expect(lastTurn(chain).map((e) => e.uuid)).toEqual(['u2', 'a2', 'u3']);
  });
});

describe("the hook's recalled memories, read back from Claude Code's transcript", () => {
  it('counts the files and bytes an earlier UserPromptSubmit context recalled, and only for this memory directory', () => {
    const dir = '/home/u/.claude/projects/-repo/memory';
    const context = recallContext(dir, [
      {
        path: 'project_deploy.md',
        header: `Memory (saved today): ${dir}/project_deploy.md:`,
        content: 'ams',
      },
      { path: 'team/ci.md', header: `Memory (saved today): ${dir}/team/ci.md:`, content: 'ci' },
    ]);
    // The entry as Claude Code 2.1.328 writes it for a hook's additionalContext.
    const recorded = {
      type: 'attachment',
      uuid: '5172ef6c-d3ce-41a6-a61d-d92f60c25f4b',
      attachment: {
        type: 'hook_additional_context',
        content: [context],
        hookName: 'UserPromptSubmit',
        toolUseID: 'hook-423d2d74-a0ab-4772-903f-326c55671a7e',
        hookEvent: 'UserPromptSubmit',
      },
      rendered: [
        {
          content: `<system-reminder>\nUserPromptSubmit hook additional context: ${context}\n</system-reminder>`,
        },
      ],
      renderedRole: 'system',
    };
    const seen = hookSurfacedMemories([{ type: 'user' }, recorded], dir);
    expect([...seen.paths]).toEqual(['project_deploy.md', 'team/ci.md']);
    expect(seen.bytes).toBe(Buffer.byteLength(context, 'utf8'));
    // Another project's directory, another hook's context, or another event: nothing.
    expect(hookSurfacedMemories([recorded], '/other/memory').paths.size).toBe(0);
    const other = { ...recorded, attachment: { ...recorded.attachment, content: ['Build status: green'] } };
    expect(hookSurfacedMemories([other], dir).bytes).toBe(0);
    const start = { ...recorded, attachment: { ...recorded.attachment, hookEvent: 'SessionStart' } };
    expect(hookSurfacedMemories([start], dir).paths.size).toBe(0);
  });
});
