import { promises as fs, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { AgentSession, describeReceipts } from '@engram/agent-session/agent-session';
import { describeRecall } from '@engram/agent-session/memory/recall-prefetch';
import { mainAgentPolicy } from '@engram/agent-session/permissions';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { redactUrl } from '@engram/queue/backend-config';
import { type RecordedRequest, startModelServer } from '@engram/scripted-model/model-server';
import { jsonReply, reply, type ScriptStep, text, textReply, toolUse } from '@engram/scripted-model/replies';
import type { AgentConfig } from '../config.js';
import { createAgentRuntime } from '../runtime.js';
import { startLocalStack } from '../stack/local-stack.js';
import { EXIT, type Output } from './output.js';

// `engram demo`: the whole loop with no API key — a first session states a preference, the workers extract it
// into a memory file, and the file and index are shown. The model is Engram's local scripted model server:
// every reply is canned, and the demo says so.
//
// What it keeps: the memory and transcripts of its own project, ENGRAM_HOME/demo-project (reset at each run),
// so `engram memory list --cwd <that dir>` — the command it prints last — shows them. What it does not keep:
// the queue engine it starts when none is configured runs on throwaway data that is removed on exit.

const PREFERENCE = 'From now on, always use pnpm in this repo — never npm. npm breaks our workspace links.';
const QUESTION = 'How should I install the dependencies for this project?';

function lastUserText(r: RecordedRequest): string {
  const last = r.body.messages.at(-1);
  if (!last) return '';
  return typeof last.content === 'string'
    ? last.content
    : last.content.map((b) => (typeof b.text === 'string' ? b.text : '')).join('\n');
}

function demoMemory(): string {
  return [
    '---',
    'name: Use pnpm, never npm',
    'description: In this repo the user wants pnpm for installs and scripts; npm breaks workspace links',
    'type: feedback',
    '---',
    'Use pnpm for every install and script in this repository; never npm.',
    '',
    '**Why:** the user said npm breaks their workspace links.',
    '**How to apply:** run `pnpm install` / `pnpm test`; if a doc says npm, translate it.',
    '',
  ].join('\n');
}

function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** Tool rounds the scripted main model takes, at most, before answering without the recalled memory. */
const MAX_LOOKING_ROUNDS = 20;

/** The scripted model: the main agent's replies, the extraction fork's tool calls. */
export function demoResponder(memoryDir: string) {
  // The main model "thinks" until the small model has answered recall, so the scripted run shows the injection
  // deterministically (in real use the small model is simply faster than the main one).
  let selectorAnswered!: () => void;
  const answered = new Promise<void>((resolve) => {
    selectorAnswered = resolve;
  });
  return async (r: RecordedRequest): Promise<ScriptStep> => {
    const all = JSON.stringify(r.body.messages);
    const last = lastUserText(r);
    if (all.includes('You are now the memory extraction subagent')) {
      if (last.includes('You are now the memory extraction subagent')) {
        return reply(
          text('The user stated a durable preference about tooling; saving it as feedback.'),
          toolUse('Write', { file_path: join(memoryDir, 'feedback_pnpm.md'), content: demoMemory() }),
        );
      }
      return textReply('Saved 1 memory: feedback_pnpm.md.');
    }
    // The recall selector (small model, structured output): pick the pnpm memory when it is offered.
    if (r.body.output_config?.format) {
      setTimeout(selectorAnswered, 0);
      return jsonReply({ selected_memories: last.includes('feedback_pnpm.md') ? ['feedback_pnpm.md'] : [] });
    }
    if (last.includes(QUESTION)) {
      // The main model "thinks" until the recall selector has answered (bounded), then a little longer.
      await Promise.race([answered, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      return {
        ...reply(text('Let me look at the project first.'), toolUse('Glob', { pattern: '*.json' })),
        latencyMs: 300,
      };
    }
    if (last.includes(PREFERENCE)) {
      return textReply('Understood — I will use pnpm for installs and scripts here, never npm.');
    }
    if (all.includes(QUESTION)) {
      // Only the recalled memory's body (not the MEMORY.md pointer) says this: was the memory injected?
      if (all.includes('Use pnpm for every install and script')) {
        return textReply(
          'Run `pnpm install` — not npm: you told me npm breaks this repo’s workspace links (recalled from memory).',
        );
      }
      // Not injected yet: the recall result reaches the turn only before a model call, so on a slow machine the
      // model "keeps looking" (each tool round is another chance) for a bounded number of rounds.
      const rounds = r.body.messages.filter((m) => m.role === 'assistant').length;
      if (rounds < MAX_LOOKING_ROUNDS) {
        return {
          ...reply(text('Still looking.'), toolUse('Glob', { pattern: '*.yaml' })),
          latencyMs: 500,
        };
      }
      return textReply('Run the install with your usual package manager.');
    }
    return textReply('(scripted demo reply)');
  };
}

export const DEMO_PROJECT_DIRNAME = 'demo-project';

export async function demoCommand(config: AgentConfig, opts: { home?: string }, io: Output): Promise<number> {
  const engramHome = opts.home ?? config.engramHome;
  const project = join(engramHome, DEMO_PROJECT_DIRNAME);
  mkdirSync(project, { recursive: true });
  // Start from a clean slate: the demo project's memory and transcripts are the demo's own, from a previous run.
  const previous = await resolveEngramPaths({ engramHome, cwd: project });
  if (previous.projectRoot !== previous.cwd) {
    io.err(
      `engram demo: ${project} is inside the git repository ${previous.projectRoot}, so the demo would write into ` +
        "that project's memory. Run it with --home <a directory outside any repository>.",
    );
    return EXIT.usage;
  }
  rmSync(previous.memoryDir, { recursive: true, force: true });
  rmSync(previous.transcriptDir, { recursive: true, force: true });
  const server = await startModelServer();
  const demoConfig: AgentConfig = {
    ...config,
    engramHome,
    memoryDirOverride: undefined,
    anthropic: { apiKey: 'demo-no-key-needed', baseURL: server.url },
    scriptedModel: true,
    memoryEnabled: true,
  };
  let stack: Awaited<ReturnType<typeof startLocalStack>> | undefined;
  try {
    stack = await startLocalStack({
      engramHome,
      configured: config.backend,
      namespace: `${config.namespace}-demo`,
      httpPort: 0,
      scratch: true,
      workerEnv: {
        ANTHROPIC_API_KEY: 'demo-no-key-needed',
        ANTHROPIC_BASE_URL: server.url,
        LOG_LEVEL: 'error',
        ENGRAM_DASHBOARD: 'false',
        ENGRAM_SMALL_MODEL: config.smallModel,
      },
    });
    const runtime = createAgentRuntime({
      ...demoConfig,
      backend: stack.backend,
      namespace: `${config.namespace}-demo`,
    });
    try {
      io.out(
        'Engram demo — SCRIPTED: the model is Engram’s local test server with canned replies, not Claude.',
      );
      io.out(
        `Queue engine: ${stack.backend.kind} at ${redactUrl(stack.backend.url)}; ENGRAM_HOME ${engramHome}`,
      );
      for (const note of stack.notes) io.out(`note: ${note}`);
      const session = await AgentSession.open(runtime, { cwd: project });
      server.respond(demoResponder(session.paths.memoryDir));
      io.out(`\nSession 1 (${session.sessionId})\n> ${PREFERENCE}`);
      const turn = await session.runTurn(PREFERENCE, {
        boundary: ATTENDED,
        canUseTool: mainAgentPolicy({ paths: session.paths, allowedTools: new Set() }),
      });
      io.out(turn.answer);
      if (turn.memory.extract.status !== 'queued') {
        io.err(
          `engram demo: memory work was not queued: ${'reason' in turn.memory.extract ? turn.memory.extract.reason : ''}`,
        );
        return EXIT.failure;
      }
      io.out('\n[the agent has answered; a worker now extracts memories from the turn in the background…]');
      const drained = await runtime.memory!.drainExtraction(session, turn.leaf.leafSeq, 30_000);
      await session.recordReceipts(drained.receipts);
      if (!drained.done) {
        io.err('engram demo: the extraction did not finish within 30 s.');
        return EXIT.failure;
      }
      io.out(describeReceipts(drained.receipts));
      const index = await fs.readFile(session.paths.memoryIndexPath, 'utf8');
      io.out(`\n${session.paths.memoryIndexPath}:\n${index}`);
      const file = join(session.paths.memoryDir, 'feedback_pnpm.md');
      io.out(`${file}:\n${await fs.readFile(file, 'utf8')}`);

      const second = await AgentSession.open(runtime, { cwd: project });
      io.out(
        `Session 2 (${second.sessionId}) — a new conversation; its first message carries MEMORY.md\n> ${QUESTION}`,
      );
      const answer = await second.runTurn(QUESTION, {
        boundary: ATTENDED,
        canUseTool: mainAgentPolicy({ paths: second.paths, allowedTools: new Set() }),
        onEvent: (e) => {
          if (e.type === 'tool_use') io.out(`  · ${e.text}`);
        },
      });
      const recalled = describeRecall(answer.memory.recall);
      io.out(
        recalled
          ? `  · ${recalled} — chosen by the small-model side query while the agent worked, injected before its next model call`
          : `  · recall: ${answer.memory.recall.status}`,
      );
      io.out(answer.answer);
      const again = opts.home ? `ENGRAM_HOME=${shellQuote(engramHome)} ` : '';
      io.out(
        `\nKept: the demo's memory in ${session.paths.memoryDir} (the rest was temporary and is removed).\n` +
          `See it with:\n  ${again}npx engram memory list --cwd ${shellQuote(project)}`,
      );
      return EXIT.ok;
    } finally {
      await runtime.close();
    }
  } finally {
    await stack?.stop();
    await server.close();
  }
}
