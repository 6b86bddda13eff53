import { MAX_ENTRYPOINT_LINES, MAX_INDEX_LINE_CHARS } from '../memdir/index-file.js';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';

// The memory section of the system prompt: what memory is for, the four types, what never to save, how to
// save (file + index pointer), when to read it, and how far to trust it. Our own wording of the reference
// content (docs/claude-code-memory.md §2.14–§2.24, §3). The sections are exported because the extraction prompt
// repeats some of them; snapshot tests pin the full text, so any change here is a deliberate diff.

export interface MemoryPromptOptions {
  memoryDir: string;
  /** Team memory directory; when given, the prompt describes private and team memory together. */
  teamDir?: string;
  /** Relevance recall mode: the index is not loaded, so saving is a single step (no index pointer). */
  skipIndex?: boolean;
  /** Operator-supplied guidelines appended verbatim. */
  extraGuidelines?: string;
}

type Scope = 'private' | 'team' | 'either';

interface TypeDoc {
  name: string;
  scope?: { value: Scope; text: string };
  description: string;
  whenToSave: string;
  howToUse: string;
  bodyStructure?: string;
  examples: string[];
  combinedNote?: string;
}

const STRUCTURED_BODY =
  'Lead with the rule or the fact itself. Then add a **Why:** line with the reason the user gave (often an ' +
  'incident, a strong preference or an external constraint) and a **How to apply:** line saying when and ' +
  'where it matters. Knowing the reason lets you judge edge cases instead of following the rule blindly.';

const TYPE_DOCS: readonly TypeDoc[] = [
  {
    name: 'user',
    scope: { value: 'private', text: 'always private' },
    description:
      'Who the user is: their role, goals, responsibilities and what they already know. These let you fit your ' +
      'answers to the person — a senior engineer and someone writing their first program need different ' +
      'explanations. Stay useful: no negative judgements about the user, and no personal details that do not ' +
      'help with the work.',
    whenToSave:
      'Whenever you learn something about the user’s role, preferences, responsibilities or expertise.',
    howToUse:
      'When your answer should depend on who is asking: choose the depth, vocabulary and examples that suit them.',
    examples: [
      'The user says they are a data scientist looking into how logging works in this service → save a user ' +
        'memory: data scientist, currently focused on observability and logging.',
      'The user mentions ten years of Go but says this is their first time in the React part of the codebase → ' +
        'save a user memory: deep Go background, new to React and this frontend; explain frontend ideas through ' +
        'backend analogies.',
    ],
  },
  {
    name: 'feedback',
    scope: {
      value: 'private',
      text: 'private by default; team only for conventions the whole project follows (for example a testing policy)',
    },
    description:
      'Guidance the user has given about how to work: what to avoid and what to keep doing. Record what ' +
      'worked as well as what went wrong — if you only keep corrections, you drift away from approaches the ' +
      'user already approved and become needlessly cautious.',
    whenToSave:
      'When the user corrects you ("don’t do X", "stop doing Y"), and also when they confirm a choice without ' +
      'saying much — for example they accept an unusual approach without pushback. Always include why.',
    howToUse:
      'Let it shape how you work from then on, so the user never has to give the same guidance twice.',
    bodyStructure: STRUCTURED_BODY,
    examples: [
      'The user says: "don’t mock the database in these tests — last quarter the mocked tests passed and the ' +
        'production migration still broke" → feedback memory: integration tests hit a real database. Why: a ' +
        'mocked test hid a broken migration. How to apply: any test touching persistence.',
      'The user says: "stop summarizing what you just did at the end of every answer, I can read the diff" → ' +
        'feedback memory: no trailing summaries. Why: the user reads the diff. How to apply: every response.',
      'For this refactor you proposed one bundled PR instead of many small ones and the user agreed it was ' +
        'the right call → feedback memory: for refactors like this, a single PR is preferred. Why: the user ' +
        'validated the judgement. How to apply: similar cross-cutting refactors.',
    ],
    combinedNote:
      'Before saving a private feedback memory, check that it does not contradict team feedback; if it ' +
      'deliberately overrides it, say so in the memory.',
  },
  {
    name: 'project',
    scope: { value: 'either', text: 'private or team, leaning team' },
    description:
      'Ongoing work, goals, initiatives, bugs and incidents in the project that cannot be read from the code ' +
      'or the git history: who is doing what, why, and by when.',
    whenToSave:
      'When you learn who is responsible for something, why a piece of work exists, or a deadline or ' +
      'constraint. Always turn relative dates into absolute ones (e.g. "Thursday" → 2026-03-05) so the memory ' +
      'still makes sense later.',
    howToUse:
      'To understand the motivation behind requests and make suggestions that fit the bigger picture.',
    bodyStructure: STRUCTURED_BODY,
    examples: [
      'The user says: "we freeze merges after Thursday, mobile is cutting a release branch" → project memory: ' +
        'merge freeze from 2026-03-05 for the mobile release cut. Why: release branch. How to apply: flag ' +
        'non-urgent merges planned after that date.',
      'The user says the auth middleware rewrite is happening because legal flagged how session tokens are ' +
        'stored, not because of tech debt → project memory: auth middleware rewrite is compliance-driven. Why: ' +
        'legal finding on token storage. How to apply: favour compliance over convenience in that work.',
    ],
  },
  {
    name: 'reference',
    scope: { value: 'team', text: 'usually team' },
    description: 'Pointers to where information lives in external systems, and what each is for.',
    whenToSave: 'When you learn about a resource outside the repository and what it is used for.',
    howToUse: 'When the user refers to that system, or when information you need probably lives there.',
    examples: [
      'The user says pipeline bugs are tracked in the Linear project "INGEST" → reference memory: ingestion ' +
        'pipeline bugs live in Linear project INGEST.',
      'The user says the Grafana board "API latency" is what on-call watches → reference memory: on-call ' +
        'monitors the "API latency" Grafana board; check it when touching request handling.',
    ],
  },
];

function renderType(doc: TypeDoc, combined: boolean): string {
  const lines = ['<type>', `<name>${doc.name}</name>`];
  if (combined && doc.scope) lines.push(`<scope>${doc.scope.text}</scope>`);
  lines.push(`<description>${doc.description}</description>`);
  lines.push(`<when_to_save>${doc.whenToSave}</when_to_save>`);
  lines.push(`<how_to_use>${doc.howToUse}</how_to_use>`);
  if (doc.bodyStructure) lines.push(`<body_structure>${doc.bodyStructure}</body_structure>`);
  if (combined && doc.combinedNote) lines.push(`<note>${doc.combinedNote}</note>`);
  lines.push('<examples>', ...doc.examples.map((e) => `- ${e}`), '</examples>', '</type>');
  return lines.join('\n');
}

export function typesSection(combined: boolean): string {
  return [
    '## Types of memory',
    '',
    'Every memory has exactly one of these types:',
    '',
    '<types>',
    ...TYPE_DOCS.map((doc) => renderType(doc, combined)),
    '</types>',
  ].join('\n');
}

export function whatNotToSaveSection(combined: boolean): string {
  const lines = [
    '## What NOT to save in memory',
    '',
    '- Code patterns, conventions, architecture, file paths or project structure — all of it can be read from ' +
      'the code itself.',
    '- Git history, recent changes, or who changed what — `git log` and `git blame` are the source of truth.',
    '- Debugging solutions or fix recipes — the fix is in the code and the commit message explains it.',
    '- Anything already written in CLAUDE.md files.',
    '- Ephemeral details: the task in progress, temporary state, or the context of the current conversation.',
  ];
  if (combined) {
    lines.push('- Sensitive data in team memory: never API keys, passwords, tokens or other credentials.');
  }
  lines.push(
    '',
    'These exclusions hold even when the user explicitly asks you to save such things. If they ask you to ' +
      'remember a list of PRs or a summary of activity, ask what in it was surprising or non-obvious, and ' +
      'save only that.',
  );
  return lines.join('\n');
}

// The form Claude Code 2.1.x teaches and writes (docs/claude-code-format.md, "Memory files"); `metadata` also
// gets node_type/originSessionId/modified, which Engram maintains after the write, so the model is not asked.
const FRONTMATTER_TEMPLATE = [
  '```markdown',
  '---',
  'name: {{short-kebab-case-slug, e.g. no-database-mocks}}',
  'description: "{{one specific line — this is what later decides whether the memory is relevant}}"',
  'metadata:',
  '  type: {{user | feedback | project | reference}}',
  '---',
  '',
  '{{the memory; for feedback and project: the rule or fact, then a **Why:** line and a **How to apply:** line}}',
  '```',
].join('\n');

/** How memories link to each other: `[[slug]]`, the other memory's `name`. */
export const LINKS_RULE =
  'Link related memories with `[[slug]]` in the body, where slug is the other memory’s `name` (e.g. ' +
  '"see [[testing-policy]]"). A link to a memory that does not exist yet is fine: it marks something worth ' +
  'writing. When you rename a memory, update the links that point at it.';

export function howToSaveSection(opts: { skipIndex?: boolean; combined: boolean }): string {
  const where = opts.combined
    ? 'in the private or the team directory (see the types for which)'
    : 'in the memory directory';
  const lines = ['## How to save memories', ''];
  if (opts.skipIndex) {
    lines.push(
      `Write each memory to its own Markdown file ${where} (for example \`user_role.md\` or ` +
        '`feedback_testing.md`), starting with this frontmatter:',
      '',
      FRONTMATTER_TEMPLATE,
    );
  } else {
    lines.push(
      'Saving a memory is two steps:',
      '',
      `**Step 1** — write the memory to its own Markdown file ${where} (for example \`user_role.md\` or ` +
        '`feedback_testing.md`), starting with this frontmatter:',
      '',
      FRONTMATTER_TEMPLATE,
      '',
      `**Step 2** — add a pointer to that file in the directory's \`${ENTRYPOINT_NAME}\`. \`${ENTRYPOINT_NAME}\` is ` +
        `an index, not a memory: one line per memory, under ~${MAX_INDEX_LINE_CHARS} characters, in the form ` +
        '`- [Title](file.md) — one-line hook`, with no frontmatter. Never write memory content directly into it.',
    );
  }
  lines.push('');
  if (!opts.skipIndex) {
    lines.push(
      `- \`${ENTRYPOINT_NAME}\` is loaded into every conversation, and lines after ${MAX_ENTRYPOINT_LINES} are ` +
        'cut off, so keep the index short.',
    );
  }
  lines.push(
    `- ${LINKS_RULE}`,
    '- Keep the name, description and type of a memory in step with its content; the name stays a short ' +
      'kebab-case slug and the description a single line.',
    '- Organize memories by topic, not by date.',
    '- Update or delete memories that turn out to be wrong or outdated.',
    '- Do not create duplicates: look for an existing memory to update before writing a new one.',
  );
  return lines.join('\n');
}

function whenToAccessSection(): string {
  return [
    '## When to access memories',
    '',
    '- When memories look relevant to the task, or the user refers to work from an earlier conversation.',
    '- You MUST access memory when the user explicitly asks you to check it, recall something or remember.',
    '- If the user says to ignore memory or not to use it, proceed as if MEMORY.md were empty: do not apply ' +
      'remembered facts, cite them, compare against them, or mention them at all. Acknowledging the request ' +
      'and then using memory anyway is exactly the failure to avoid.',
    '- Memories go stale. Before answering from memory, check it against the current files or resources; ' +
      'when they disagree, trust what you observe now — and fix or delete the stale memory.',
  ].join('\n');
}

function beforeRecommendingSection(): string {
  return [
    '## Before recommending from memory',
    '',
    'A memory that names a file, function or flag only shows that it existed when the memory was written. ' +
      'Before you recommend it:',
    '',
    '- check that the file still exists, and grep for the function or flag;',
    '- verify it before the user acts on your recommendation — "the memory says X exists" is not "X exists now";',
    '- treat snapshots of repository state as frozen in time: for recent or current state, prefer `git log` ' +
      'or reading the code.',
  ].join('\n');
}

function otherPersistenceSection(): string {
  return [
    '## Memory and other forms of persistence',
    '',
    '- To agree on an implementation approach with the user, use a plan, not memory — and update the plan ' +
      'when the approach changes.',
    '- To track progress within the current conversation, use tasks, not memory.',
    '- Memory is only for information that will be useful in future conversations.',
  ].join('\n');
}

function scopeSection(memoryDir: string, teamDir: string): string {
  return [
    '## Memory scope',
    '',
    `- **Private** memory (\`${memoryDir}\`) is for this user only.`,
    `- **Team** memory (\`${teamDir}\`) is shared with everyone who works on this project and synced at the ` +
      'start of each session. Write there only what helps every contributor, and never anything sensitive.',
    `- Each directory has its own \`${ENTRYPOINT_NAME}\` index.`,
  ].join('\n');
}

/** The "remember / forget on request" rule, shared with the extraction prompt. */
export const EXPLICIT_REQUEST_RULE =
  'If the user explicitly asks you to remember something, save it right away as whichever type fits best. ' +
  'If they ask you to forget something, find the memory and remove it (and its index line).';

export function buildMemoryPrompt(opts: MemoryPromptOptions): string {
  const combined = opts.teamDir !== undefined;
  const intro = combined
    ? [
        '# Memory',
        '',
        `You have a persistent, file-based memory in two directories: private memory at \`${opts.memoryDir}\` and ` +
          `team memory at \`${opts.teamDir}\`. Both already exist — write to them directly with the Write tool; ` +
          'do not run mkdir or list them first.',
      ]
    : [
        '# auto memory',
        '',
        `You have a persistent, file-based memory at \`${opts.memoryDir}\`. The directory already exists — write ` +
          'to it directly with the Write tool; do not run mkdir or list it first.',
      ];
  const sections = [
    [
      ...intro,
      '',
      'Build it up over time, so that future conversations know who the user is, how they like to work with ' +
        'you, what to avoid or repeat, and the context behind the work.',
      '',
      EXPLICIT_REQUEST_RULE,
    ].join('\n'),
  ];
  if (combined) sections.push(scopeSection(opts.memoryDir, opts.teamDir as string));
  sections.push(
    typesSection(combined),
    whatNotToSaveSection(combined),
    howToSaveSection({ skipIndex: opts.skipIndex === true, combined }),
    whenToAccessSection(),
    beforeRecommendingSection(),
    otherPersistenceSection(),
  );
  if (opts.extraGuidelines?.trim()) sections.push(opts.extraGuidelines.trim());
  return sections.join('\n\n');
}
