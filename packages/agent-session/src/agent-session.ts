import { randomUUID } from 'node:crypto';
import { type AutoCompactOutcome, reactiveCompact } from '@engram/agent-runtime/compact/auto-compact';
import {
  type ClaudeMdFile,
  renderConditionalRule,
  ruleMatchesPath,
} from '@engram/agent-runtime/context/claude-md';
import {
  type CacheSafeParams,
  cacheSafeParamsPathFor,
  loadCacheSafeParams,
  saveCacheSafeParams,
} from '@engram/agent-runtime/fork/cache-safe-params';
import { seedReadFileState } from '@engram/agent-runtime/fork/run-forked-agent';
import {
  type AttachmentInput,
  type EndReason,
  type QueryLoopResult,
  runQueryLoop,
} from '@engram/agent-runtime/loop/query-loop';
import type { ModelClient, TextDelta, Usage } from '@engram/agent-runtime/model/client';
import { estimateTokens, tokenCountWithEstimation } from '@engram/agent-runtime/model/tokens';
import type { ToolBoundary } from '@engram/agent-runtime/sandbox/unattended';
import { defaultTools, toolDefinitions } from '@engram/agent-runtime/tools/registry';
import type { CanUseTool, ReadFileState } from '@engram/agent-runtime/tools/tool';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import {
  type ChainEntry,
  createSystemEntry,
  createUserEntry,
  type TranscriptEntry,
} from '@engram/agent-runtime/transcript/entry';
import { readGitBranch } from '@engram/agent-runtime/transcript/git-branch';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import type { MemoryQueue, MemoryWorkStatus, SessionRef } from '@engram/memory-client/memory-queue';
import {
  describeTeamSync,
  type TeamSyncStatus,
  type TeamSyncTrigger,
} from '@engram/memory-client/team-sync-trigger';
import {
  type EngramPaths,
  resolveEngramPaths,
  validateSessionId,
} from '@engram/memory-core/paths/memory-paths';
import {
  formatMemoryNotice,
  MEMORY_NOTICE_ATTACHMENT_KIND,
  memoryUpdateAttachment,
  unannouncedMemoryChanges,
} from '@engram/memory-core/prompts/memory-notice';
import type { ProjectChange, ProjectChangeMarks } from '@engram/queue/state/project-changes';
import type { ExtractReceipt } from '@engram/queue/state/session-state';
import { inSpan } from '@engram/telemetry/spans';
import { Compactor } from './compactor.js';
import type { AgentSessionConfig } from './config.js';
import { buildSessionContext, describeOverflow, type SessionContext } from './context/session-context.js';
import { DEFAULT_DREAM_THRESHOLDS, type DreamThresholds, maybeEnqueueDream } from './memory/dream-trigger.js';
import { RecallPrefetch, type RecallStatus } from './memory/recall-prefetch.js';
import { SessionMemoryTrigger } from './memory/session-memory-trigger.js';
import { maybeCleanupTranscripts } from './transcript-retention.js';

// One conversation with the foreground agent: context assembly, turns through the runtime's query loop, the
// append-only transcript, the cache-safe parameters workers fork from, and the memory work each turn
// enqueues. It never runs a memory fork and never waits on one (except the bounded drain at exit).

export const ATTACHMENT_KIND_RULE = 'claude_md_rule';

export interface TurnEvent {
  type: 'text' | 'tool_use' | 'tool_denied';
  text: string;
}

export interface TurnOptions {
  canUseTool: CanUseTool;
  signal?: AbortSignal;
  onEvent?: (event: TurnEvent) => void;
  /**
   * Called before every transcript append of the turn; throws to stop the turn before it writes (the hosted
   * service passes its session lease's fencing check, so a replica that lost the lease never appends).
   */
  fence?: () => Promise<void>;
  /** Every transcript entry the turn appends, right after it is written (the hosted service streams them). */
  onEntry?: (entry: ChainEntry) => void;
  /** Text deltas of the model's replies as they stream in (a live view; entries carry the full text). */
  onTextDelta?: (delta: TextDelta & { turn: number }) => void;
  /**
   * The turn's filesystem boundary, in every tool's context: `ATTENDED` where a person approves each call (the
   * CLI), or a served turn's prepared unattended boundary (its jail, read boundary and OS sandbox).
   */
  boundary: ToolBoundary;
}

export interface TurnResult {
  sessionId: string;
  answer: string;
  usage: Usage;
  turns: number;
  endReason: EndReason;
  leaf: { leafUuid: string; leafSeq: number };
  deniedCalls: number;
  /** How the context was compacted during this turn, if it was. */
  compaction?: { via: 'session-memory' | 'model'; reactive: boolean };
  memory: {
    extract: MemoryWorkStatus;
    recall: RecallStatus;
    dream: MemoryWorkStatus;
    /** Session-memory updates enqueued during the turn. */
    sessionMemoryUpdates: number;
  };
}

export interface AgentSessionDeps {
  config: AgentSessionConfig;
  client: ModelClient;
  /** Absent when memory is disabled. */
  memory: MemoryQueue | undefined;
  /** Dream gate thresholds (default 24 h / 5 sessions / 10 min). */
  dream?: DreamThresholds;
  /** Team memory sync (absent when memory is disabled or ENGRAM_TEAM_SYNC_URL is unset). */
  teamSync?: TeamSyncTrigger | undefined;
}

export class AgentSession {
  /** Notices for the user (e.g. an index cut), each shown once. */
  readonly notices: string[] = [];
  /** How the session-start team memory pull went, when team sync is on. */
  teamSync: TeamSyncStatus | undefined;
  private readonly tools = defaultTools();
  private readFileState: ReadFileState | undefined;
  private paramsSaved = false;
  /** Line count of the transcript: the `leafSeq` of its newest entry. */
  private seq = 0;
  private readonly compactor: Compactor;
  private readonly sessionMemory: SessionMemoryTrigger | undefined;
  /** Stamped on this session's entries, as Claude Code does. */
  private gitBranch: string | undefined;

  private constructor(
    private readonly deps: AgentSessionDeps,
    readonly sessionId: string,
    readonly paths: EngramPaths,
    readonly store: TranscriptStore,
    private context: SessionContext,
    readonly resumed: boolean,
    /** The hosted-service tenant (from the authenticated request); every job of the session carries it. */
    readonly tenant: string | undefined,
  ) {
    this.compactor = new Compactor({
      client: deps.client,
      memory: deps.memory,
      ref: this,
      engramHome: deps.config.engramHome,
      contextWindow: deps.config.contextWindow,
      maxOutputTokens: deps.config.maxOutputTokens,
      transcriptPath: store.path,
      params: () => this.cacheSafeParams(),
    });
    this.sessionMemory = deps.memory ? new SessionMemoryTrigger(deps.memory, this) : undefined;
  }

  static async open(
    deps: AgentSessionDeps,
    opts: { cwd: string; sessionId?: string; tenant?: string },
  ): Promise<AgentSession> {
    const sessionId = validateSessionId(opts.sessionId ?? randomUUID());
    const paths = await resolveEngramPaths({
      engramHome: deps.config.engramHome,
      cwd: opts.cwd,
      ...(deps.config.memoryDirOverride ? { memoryDirOverride: deps.config.memoryDirOverride } : {}),
    });
    // Team memory first, so the index below loads what the team has (bounded wait; never fails the session).
    const teamSync = await deps.teamSync?.atSessionStart(paths, sessionId, opts.tenant);
    const store = new TranscriptStore(paths.transcriptPath(sessionId));
    const { entries } = await store.readAll().catch(() => ({ entries: [] as TranscriptEntry[] }));
    const resumed = entries.length > 0;
    // A resumed session keeps its session-start snapshot, so the cached prefix (and every fork's) is unchanged.
    const saved = resumed
      ? await loadCacheSafeParams(cacheSafeParamsPathFor(paths.transcriptPath(sessionId))).catch(
          () => undefined,
        )
      : undefined;
    const snapshot = saved && saved.model === deps.config.model ? saved : undefined;
    // With a snapshot, its system prompt and user context (the memory index it started with) are what the session
    // sends: only the conditional rules are read again (a served session is reopened for every turn).
    const fromSnapshot = snapshot?.userContext !== undefined;
    // Taken before the index loads: a change recorded after this is not in what the session starts with. No index
    // is read from a snapshot, so then the two run at once (as does the branch read).
    const marks = deps.memory
      ? AgentSession.projectChangeMarksFor(deps.memory, { sessionId, paths, tenant: opts.tenant })
      : Promise.resolve(undefined);
    const contextOpts = {
      paths,
      homeDir: deps.config.homeDir,
      managedClaudeMdPath: deps.config.managedClaudeMdPath,
      workspaceRoot: deps.config.workspaceRoot,
      memoryEnabled: deps.memory !== undefined,
      ...(fromSnapshot ? { rulesOnly: true } : {}),
    };
    const [projectMarks, context, gitBranch] = await Promise.all([
      marks,
      fromSnapshot ? buildSessionContext(contextOpts) : marks.then(() => buildSessionContext(contextOpts)),
      readGitBranch(paths.cwd),
    ]);
    const session = new AgentSession(deps, sessionId, paths, store, context, resumed, opts.tenant);
    session.projectMarks = projectMarks;
    session.gitBranch = gitBranch;
    session.teamSync = teamSync;
    const teamLine = teamSync && describeTeamSync(teamSync);
    if (teamLine) session.notices.push(teamLine);
    if (snapshot) {
      session.context = {
        ...context,
        system: snapshot.system,
        userContext: snapshot.userContext ?? context.userContext,
      };
      session.paramsSaved = true;
    }
    if (!resumed) {
      for (const { path, overflow } of context.indexOverflows)
        session.notices.push(describeOverflow(path, overflow));
    }
    // The trigger's baseline lives in the queue's store: a session resumed by another process picks it up.
    await session.sessionMemory?.load();
    // Best-effort housekeeping of the shared ENGRAM_HOME, off the turn's path.
    void maybeCleanupTranscripts(deps.config.engramHome, deps.config.cleanupPeriodDays).catch(
      () => undefined,
    );
    return session;
  }

  /** MEMORY.md caps that fired when this session's context was built (reported once, never silent). */
  get indexOverflows(): SessionContext['indexOverflows'] {
    return this.context.indexOverflows;
  }

  get userContext(): string {
    return this.context.userContext;
  }

  cacheSafeParams(): CacheSafeParams {
    return {
      model: this.deps.config.model,
      system: this.context.system,
      tools: toolDefinitions(this.tools),
      userContext: this.context.userContext,
      maxTokens: this.deps.config.maxOutputTokens,
    };
  }

  async liveChain(): Promise<{ entries: TranscriptEntry[]; chain: ChainEntry[] }> {
    const { entries } = await this.store.readAll().catch(() => ({ entries: [] as TranscriptEntry[] }));
    this.seq = entries.length;
    if (entries.length === 0) return { entries, chain: [] };
    return { entries, chain: buildChain(entries).live as ChainEntry[] };
  }

  /** The running turn's write fence (TurnOptions.fence). */
  private fence: (() => Promise<void>) | undefined;

  private async append(entries: readonly TranscriptEntry[]): Promise<void> {
    await this.fence?.();
    const written = await this.store.append(entries);
    this.seq += written.length;
  }

  private async ensureParamsSaved(): Promise<void> {
    if (this.paramsSaved) return;
    await saveCacheSafeParams(cacheSafeParamsPathFor(this.store.path), this.cacheSafeParams());
    this.paramsSaved = true;
  }

  /**
   * Persists a compaction and starts the post-compaction context: the MEMORY.md/CLAUDE.md snapshot is rebuilt
   * (and saved for forks), the session-memory baselines move to the compacted size. The recall budget and the
   * surfaced set derive from the entries after the boundary, so they reset by themselves.
   */
  private async applyCompaction(
    outcome: Extract<AutoCompactOutcome, { compacted: true }>,
  ): Promise<ChainEntry[]> {
    await this.append(outcome.newEntries);
    await this.compactor.recordCompaction(outcome);
    this.sessionMemory?.reset(outcome.result.postTokens);
    this.context = await buildSessionContext({
      paths: this.paths,
      homeDir: this.deps.config.homeDir,
      managedClaudeMdPath: this.deps.config.managedClaudeMdPath,
      workspaceRoot: this.deps.config.workspaceRoot,
      memoryEnabled: this.deps.memory !== undefined,
    });
    this.paramsSaved = false;
    return [...outcome.result.live];
  }

  /** `/compact`: compact now, from the notes if usable, else with a model summary. */
  async compact(): Promise<AutoCompactOutcome> {
    const { chain } = await this.liveChain();
    if (chain.length === 0) return { compacted: false, reason: 'below_threshold', consecutiveFailures: 0 };
    const outcome = await this.compactor.maybeCompact(chain, tokenCountWithEstimation(chain), true);
    if (outcome.compacted) await this.applyCompaction(outcome);
    return outcome;
  }

  async runTurn(prompt: string, opts: TurnOptions): Promise<TurnResult> {
    // The turn's span: the jobs it enqueues carry its context, so their workers' spans join this trace.
    return inSpan(
      'engram.turn',
      { attributes: { 'gen_ai.conversation.id': this.sessionId } },
      async (span) => {
        this.fence = opts.fence;
        try {
          const result = await this.runFencedTurn(prompt, opts);
          span.setAttribute('engram.turn.end_reason', result.endReason);
          return result;
        } finally {
          this.fence = undefined;
        }
      },
    );
  }

  private async runFencedTurn(prompt: string, opts: TurnOptions): Promise<TurnResult> {
    const { config, client } = this.deps;
    let { chain } = await this.liveChain();
    this.readFileState ??= seedReadFileState(chain, this.paths.cwd);
    let compaction: TurnResult['compaction'];

    // Auto-compact before the prompt goes in, so a model-written summary never swallows the pending prompt.
    if (chain.length > 0) {
      const outcome = await this.compactor.maybeCompact(
        chain,
        tokenCountWithEstimation(chain) + estimateTokens(prompt),
      );
      if (outcome.compacted) {
        chain = await this.applyCompaction(outcome);
        compaction = { via: outcome.via, reactive: false };
      }
    }
    // Memory changed for the whole project since this session last heard (a consolidation, a team pull): a
    // `memory_saved` entry before the prompt, so the model call's notice names the files.
    const announced = await this.announceProjectChanges(chain.at(-1)?.uuid ?? null);
    if (announced) chain = [...chain, announced as ChainEntry];
    const user = createUserEntry(
      {
        sessionId: this.sessionId,
        cwd: this.paths.cwd,
        parentUuid: chain.at(-1)?.uuid ?? null,
        ...(this.gitBranch ? { gitBranch: this.gitBranch } : {}),
      },
      prompt,
    );
    await this.append([user]);

    // Recall is enqueued alongside the first model call and never awaited by it.
    const recallStart: Promise<RecallPrefetch | undefined> = this.deps.memory
      ? RecallPrefetch.start(this.deps.memory, this, chain, prompt).catch(() => undefined)
      : Promise.resolve(undefined);
    const injectedRules = new Set(
      chain.filter((e) => e.attachmentKind === ATTACHMENT_KIND_RULE).map((e) => String(e.rulePath)),
    );
    let sessionMemoryUpdates = 0;

    const attempt = async (messages: readonly ChainEntry[]): Promise<QueryLoopResult> => {
      await this.ensureParamsSaved();
      return runQueryLoop({
        client,
        model: config.model,
        system: this.context.system,
        tools: this.tools,
        maxTokens: config.maxOutputTokens,
        messages,
        userContext: this.context.userContext,
        canUseTool: opts.canUseTool,
        boundary: opts.boundary,
        maxTurns: config.maxTurns,
        ...(opts.signal ? { signal: opts.signal } : {}),
        cwd: this.paths.cwd,
        sessionId: this.sessionId,
        ...(this.gitBranch ? { gitBranch: this.gitBranch } : {}),
        ...(this.readFileState ? { readFileState: this.readFileState } : {}),
        toolResultsDir: this.paths.toolResultsDir(this.sessionId),
        ...(opts.onTextDelta ? { onTextDelta: opts.onTextDelta } : {}),
        beforeModelCall: async (state) => {
          const attachments = this.conditionalRuleAttachments(state.readFileState, injectedRules);
          // Background memory work that changed files since the last reply: one short notice, first.
          const changes = unannouncedMemoryChanges(state.messages);
          const notice = formatMemoryNotice(changes);
          if (notice)
            attachments.unshift({
              content: notice,
              extra: {
                attachmentKind: MEMORY_NOTICE_ATTACHMENT_KIND,
                attachment: memoryUpdateAttachment(changes, this.paths.memoryDir),
              },
            });
          // The first request goes out at once; from the second on, a finished recall is injected after the
          // tool results (one non-blocking look per model call).
          if (state.turn >= 1) attachments.push(...((await (await recallStart)?.poll(state.messages)) ?? []));
          return attachments;
        },
        afterReply: async (reply, state) => {
          const leaf = state.newMessages.at(-1);
          if (!this.sessionMemory || !leaf) return;
          const status = await this.sessionMemory.afterReply(
            state.messages,
            { leafUuid: leaf.uuid, leafSeq: this.seq },
            tokenCountWithEstimation(state.messages),
            reply.message.content.some((b) => b.type === 'tool_use'),
          );
          if (status?.status === 'queued') sessionMemoryUpdates++;
        },
        onMessage: async (entry) => {
          await this.append([entry]);
          emitEvents(entry, opts.onEvent);
          opts.onEntry?.(entry);
        },
      });
    };
    // A "prompt is too long" reply gets exactly one reactive compaction and one retry, then a clear error.
    const run = await reactiveCompact({
      entries: [...chain, user],
      attempt,
      compact: async () => {
        const { chain: current } = await this.liveChain();
        const outcome = await this.compactor.maybeCompact(current, tokenCountWithEstimation(current), true);
        if (!outcome.compacted) return null;
        await this.applyCompaction(outcome);
        compaction = { via: outcome.via, reactive: true };
        return outcome.newEntries;
      },
    });
    const result = run.value;
    this.readFileState = result.readFileState;
    const recall: RecallStatus = (await recallStart)?.finish() ?? {
      status: 'skipped',
      reason: 'memory is disabled',
    };
    for (const denied of result.deniedCalls)
      opts.onEvent?.({ type: 'tool_denied', text: `${denied.tool}: ${denied.message}` });

    // The live chain now — what the successful attempt sent plus what it added — without re-reading the file;
    // `seq` counted every line this session appended, so it is the leaf's line number.
    const after: ChainEntry[] = [...run.entries, ...result.newMessages];
    const leaf = { leafUuid: after.at(-1)!.uuid, leafSeq: this.seq };
    const disabled: MemoryWorkStatus = { status: 'skipped', reason: 'memory is disabled' };
    let extract: MemoryWorkStatus = disabled;
    let dream: MemoryWorkStatus = disabled;
    if (this.deps.memory) {
      if (result.endReason === 'completed') {
        // This turn's entries: from its prompt (or the prompt's copy, if a reactive compaction re-emitted it).
        const start = after.findIndex((e) => e.uuid === user.uuid || e.compactedFromUuid === user.uuid);
        const turnEntries = start >= 0 ? after.slice(start) : result.newMessages;
        // Three independent hand-overs (each its own queue, none reads what another writes): at once.
        [extract, , dream] = await Promise.all([
          this.deps.memory.afterTurn(this, turnEntries, leaf),
          this.deps.teamSync?.afterTurn(this.paths, turnEntries, this.sessionId, this.tenant),
          maybeEnqueueDream(
            this.deps.memory,
            this,
            leaf.leafUuid,
            this.deps.dream ?? DEFAULT_DREAM_THRESHOLDS,
          ),
        ]);
      } else {
        extract = { status: 'skipped', reason: `the turn ended by ${result.endReason}` };
        dream = extract;
      }
    }
    return {
      sessionId: this.sessionId,
      answer: finalText(result.newMessages),
      usage: result.usage,
      turns: result.turns,
      endReason: result.endReason,
      leaf,
      deniedCalls: result.deniedCalls.length,
      ...(compaction ? { compaction } : {}),
      memory: { extract, recall, dream, sessionMemoryUpdates },
    };
  }

  /** Newest project-wide memory change per source this session has announced (ProjectChanges). */
  private projectMarks: ProjectChangeMarks | undefined;
  private projectChangesRetryAtMs = 0;

  /**
   * Where a session starts hearing of project-wide memory changes: where it left off when resumed, else
   * everything recorded so far (the index it is about to load already shows it). Best effort, bounded.
   */
  private static async projectChangeMarksFor(
    memory: MemoryQueue,
    ref: SessionRef,
  ): Promise<ProjectChangeMarks | undefined> {
    return withTimeout(async () => {
      const state = memory.sessionState(ref);
      const saved = await state.projectChangeMarks();
      if (saved) return saved;
      const newest = await memory.projectChanges(ref).newest();
      await state.setProjectChangeMarks(newest);
      return newest;
    }).catch(() => undefined);
  }

  private async loadProjectChangeMarks(): Promise<void> {
    if (this.deps.memory)
      this.projectMarks = await AgentSession.projectChangeMarksFor(this.deps.memory, this);
  }

  /**
   * Appends one `memory_saved` entry (after `parentUuid`) naming the project-wide changes this session has not
   * heard of, and moves its marks past them. Never fails a turn: a store that does not answer costs at most
   * PROJECT_CHANGES_WAIT_MS and the changes are announced on a later turn.
   */
  private async announceProjectChanges(parentUuid: string | null): Promise<TranscriptEntry | undefined> {
    const memory = this.deps.memory;
    if (!memory || Date.now() < this.projectChangesRetryAtMs) return undefined;
    if (!this.projectMarks) {
      await this.loadProjectChangeMarks();
      if (!this.projectMarks) this.projectChangesRetryAtMs = Date.now() + PROJECT_CHANGES_RETRY_MS;
      return undefined;
    }
    const marks = this.projectMarks;
    const found = await withTimeout(() => memory.projectChanges(this).since(marks)).catch(() => undefined);
    // A store that does not answer is asked again a minute later, not on every turn.
    if (!found) this.projectChangesRetryAtMs = Date.now() + PROJECT_CHANGES_RETRY_MS;
    if (!found || found.changes.length === 0) return undefined;
    const memories = found.changes.flatMap((c) => c.memories);
    const entry = createSystemEntry(
      { sessionId: this.sessionId, cwd: this.paths.cwd, parentUuid },
      'memory_saved',
      describeProjectChanges(found.changes),
      { memories, sources: [...new Set(found.changes.map((c) => c.source))] },
    );
    await this.append([entry]);
    this.projectMarks = found.marks;
    await withTimeout(() => memory.sessionState(this).setProjectChangeMarks(found.marks)).catch(
      () => undefined,
    );
    return entry;
  }

  /** Records what the workers saved, so the transcript shows it (not model-visible). */
  async recordReceipts(receipts: readonly ExtractReceipt[]): Promise<void> {
    const memories = receipts.flatMap((r) => r.memories);
    if (memories.length === 0) return;
    const { chain } = await this.liveChain();
    await this.store.append([
      createSystemEntry(
        { sessionId: this.sessionId, cwd: this.paths.cwd, parentUuid: chain.at(-1)?.uuid ?? null },
        'memory_saved',
        describeReceipts(receipts),
        { memories },
      ),
    ]);
  }

  /** Conditional CLAUDE.md rules whose globs match a file touched in this context, injected once each. */
  private conditionalRuleAttachments(readFileState: ReadFileState, injected: Set<string>): AttachmentInput[] {
    const out: AttachmentInput[] = [];
    const touched = [...readFileState.entries()].map(([path]) => path);
    for (const rule of this.context.conditionalRules) {
      if (injected.has(rule.path)) continue;
      const hit = touched.find((p) => ruleMatchesPath(rule as ClaudeMdFile, p));
      if (!hit) continue;
      injected.add(rule.path);
      out.push({
        content: `<system-reminder>\n${renderConditionalRule(rule, hit)}\n</system-reminder>`,
        extra: { attachmentKind: ATTACHMENT_KIND_RULE, rulePath: rule.path },
      });
    }
    return out;
  }
}

/** Longest a turn waits for the store when it looks for project-wide memory changes. */
const PROJECT_CHANGES_WAIT_MS = 1_000;
const PROJECT_CHANGES_RETRY_MS = 60_000;

function withTimeout<T>(fn: () => Promise<T>, ms = PROJECT_CHANGES_WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    fn(),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the queue store did not answer')), ms);
      timer.unref?.();
    }),
  ]).finally(() => clearTimeout(timer));
}

export function describeProjectChanges(changes: readonly ProjectChange[]): string {
  const parts = changes.map((c) => {
    const total = c.memories.length + (c.more ?? 0);
    const what = c.source === 'dream' ? 'Consolidation changed' : 'Team pull wrote';
    const names = c.memories.map((m) => `${m.path} (${m.action})`).join(', ');
    return `${what} ${total} memory ${total === 1 ? 'file' : 'files'}: ${names}${c.more ? ` and ${c.more} more` : ''}`;
  });
  return parts.join('; ');
}

export function describeReceipts(receipts: readonly ExtractReceipt[]): string {
  const memories = receipts.flatMap((r) => r.memories);
  // A receipt names at most 20 files; `more` counts the rest, so the total stays true.
  const more = receipts.reduce((n, r) => n + (r.more ?? 0), 0);
  if (memories.length === 0 && more === 0) return 'No new memories saved.';
  const names = [...new Set(memories.map((m) => m.path))];
  const total = names.length + more;
  const listed = more > 0 ? `${names.join(', ')} and ${more} more` : names.join(', ');
  return `Saved ${total} ${total === 1 ? 'memory' : 'memories'}: ${listed}`;
}

function finalText(entries: readonly ChainEntry[]): string {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!;
    if (entry.type !== 'assistant') continue;
    const content = entry.message?.content;
    if (typeof content === 'string') return content;
    if (Array.isArray(content)) {
      return content
        .filter((b): b is { type: 'text'; text: string } => (b as { type: string }).type === 'text')
        .map((b) => b.text)
        .join('\n')
        .trim();
    }
  }
  return '';
}

function emitEvents(entry: ChainEntry, onEvent: TurnOptions['onEvent']): void {
  if (!onEvent || entry.type !== 'assistant' || !Array.isArray(entry.message?.content)) return;
  for (const block of entry.message.content as Array<{
    type: string;
    text?: string;
    name?: string;
    input?: unknown;
  }>) {
    if (block.type === 'text' && block.text?.trim()) onEvent({ type: 'text', text: block.text });
    if (block.type === 'tool_use')
      onEvent({ type: 'tool_use', text: `${block.name} ${JSON.stringify(block.input).slice(0, 160)}` });
  }
}
