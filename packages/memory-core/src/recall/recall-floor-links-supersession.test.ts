import { describe, expect, it } from 'vitest';
import { formatMemoryManifest, type MemoryHeader } from '../memdir/scan.js';
import { lexicalRank } from './lexical.js';
import { REALISTIC_HEADERS } from './recall-fixtures.test-helpers.js';
import { type MemorySelector, selectRelevantMemories } from './select.js';
import { findSupersessions, resolveMemoryLink, supersessionNotes } from './supersession.js';

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 10, 1);
const h = (filename: string, description: string, extra: Partial<MemoryHeader> = {}): MemoryHeader => ({
  filename,
  filePath: `/mem/${filename}`,
  mtimeMs: T0,
  name: filename.replace(/\.md$/, '').replace(/_/g, ' '),
  description,
  type: 'project',
  ...extra,
});

// Two dozen memories, one of which (the feature-flags note) contains the digit 7.
const DIR: MemoryHeader[] = [
  h('project_flags.md', 'Feature flags: checkout_v2 rolled out to 7% of traffic, express_pay off'),
  ...REALISTIC_HEADERS,
  h('project_release_7.md', 'Release 7 of the mobile app ships on the 7th'),
  h('reference_ci.md', 'CI runs on GitHub Actions; the nightly job is at 02:00 UTC'),
  h('project_search.md', 'Product search uses OpenSearch; a reindex takes 40 minutes, run it off-peak'),
  h('feedback_commits.md', 'Commit subjects in imperative mood, under 72 characters'),
  h('project_tax.md', 'VAT per line item with banker rounding; EU reverse charge for B2B'),
  h('reference_grafana_board.md', 'The Grafana board "API latency" is watched by on-call'),
  h('project_payments.md', 'Payments go through Adyen; Stripe code paths are legacy'),
  h('project_images.md', 'Product images are served by Cloudinary, never committed to the repo'),
  h('user_hours.md', 'The user works mornings only from Lisbon'),
  h('project_a11y.md', 'The storefront targets WCAG 2.2 AA; keyboard navigation for every component'),
].slice(0, 24);

const names = (query: string, headers: readonly MemoryHeader[] = DIR) =>
  lexicalRank(query, headers).map((m) => m.header.filename);

describe('the lexical relevance floor', () => {
  it('recalls nothing for the penguin poem, which shares only the digit 7 and stop words with the flags note', () => {
    expect(DIR.length).toBeGreaterThanOrEqual(20);
    expect(names('a short poem about penguins sliding on ice')).toEqual([]);
    expect(names('a short poem about 7 penguins sliding on ice')).toEqual([]);
    // Without the floor (every shared token counting), the digit alone would have matched.
    expect(
      lexicalRank('7', DIR, { minScore: 0, relativeFloor: 0, singleTermMaxDf: Number.POSITIVE_INFINITY }),
    ).toEqual([]);
  });

  it('recalls nothing for prompts sharing only digits, one- or two-letter tokens or stop words', () => {
    for (const query of [
      'what is 2 + 2?',
      'give me 7 ideas, 72 at most, by 02:00',
      'is it ok to be ok? ci or no ci',
      'UI v2 on 3.14 ok',
      'the and of to with from which about',
      'der die das und oder nicht',
      'le la les et ou mais',
      'el la los y o pero',
      'これは何ですか',
      '我们如何这个',
      'tell me a joke, please',
    ]) {
      expect(names(query), query).toEqual([]);
    }
  });

  it('lets a lone shared word count only when it is rare and the only word of the prompt the directory knows', () => {
    const dir = [
      h('project_a11y.md', 'Every new component needs keyboard navigation and aria labels'),
      h('user_role.md', 'Senior Go engineer; explain UI code with backend analogies', { type: 'user' }),
      h('project_vat.md', 'VAT rules: computed per line item with banker rounding'),
      ...REALISTIC_HEADERS,
    ];
    // "explain" and "rule" are each rare, but each memory matches only one of the two words of the prompt
    // the directory knows: the prompt is about something else (chess), so nothing is recalled…
    const chess = 'explain the rules of chess to a beginner';
    expect(names(chess, dir)).toEqual([]);
    // …where letting any rare lone word count would have recalled one of them.
    expect(lexicalRank(chess, dir, { singleTermSoleKnown: false }).length).toBeGreaterThan(0);
    // When the lone rare word is all the prompt and the directory share, it still points to its memory.
    expect(names('how do aria labels work?', dir)).toEqual(['project_a11y.md']);
  });

  it("does not let an everyday word of the prompt's language qualify a memory alone; a technical one still does", () => {
    const dir = [
      h('project_release_train.md', 'The release branch is cut every Monday morning'),
      h('project_pii.md', 'Phone numbers and e-mail addresses are PII: mask them in logs'),
      h('reference_airflow.md', 'Airflow runs the nightly revenue DAG at 02:00'),
      ...REALISTIC_HEADERS,
    ];
    // Each prompt shares exactly one word with one memory, and that word is the only one of the prompt the
    // directory knows: the sole-known-word rule alone would recall the memory…
    const everyday = {
      'translate good morning into Japanese': 'project_release_train.md',
      'what is the best phone to buy this year': 'project_pii.md',
    };
    for (const [query, file] of Object.entries(everyday)) {
      expect(
        lexicalRank(query, dir, { singleTermCommon: null }).map((m) => m.header.filename),
        query,
      ).toEqual([file]);
      // …but "morning" and "phone" are common English words: shared vocabulary, not a shared topic.
      expect(names(query, dir), query).toEqual([]);
    }
    // "dag" is an everyday Dutch word (day) but not an English one, and this prompt is English.
    expect(names('rerun the DAG for me', dir)).toEqual(['reference_airflow.md']);
    // Rare and technical words still qualify alone (also pinned above).
    expect(names('which package manager, pnpm or yarn?', dir)).toEqual(['feedback_pnpm.md']);
  });

  it('falls back to the single best match, not to its runners-up', async () => {
    const dir = [
      h('project_returns_alert_owner.md', 'The returns alert is owned by squad 12', {
        name: 'returns alert owner',
      }),
      h(
        'reference_returns_threshold_alerting.md',
        'Alert on the returns threshold above 40 for ten minutes',
        {
          name: 'returns threshold alerting',
          type: 'reference',
        },
      ),
      ...REALISTIC_HEADERS,
    ];
    const query = 'who is responsible for the returns alert?';
    // Both clear the floor and score within LEXICAL_RELATIVE_FLOOR of each other…
    expect(names(query, dir)).toHaveLength(2);
    // …but the fallback injects only the best.
    const fallback = await selectRelevantMemories({
      query,
      headers: dir,
      selector: async () => {
        throw new Error('down');
      },
    });
    expect(fallback.selected.map((x) => x.filename)).toEqual([names(query, dir)[0]]);
  });

  it('still recalls the right memory for paraphrased prompts', () => {
    expect(names('should integration tests run against a real database or mocks?')[0]).toBe(
      'feedback_db_tests.md',
    );
    expect(names('is the new checkout flag on for all traffic?')[0]).toBe('project_flags.md');
    expect(names('how long does rebuilding the opensearch index take?')[0]).toBe('project_search.md');
    expect(names('which package manager do we install with, pnpm?')[0]).toBe('feedback_pnpm.md');
  });
});

describe('link-aware recall', () => {
  const runbook = h('reference_outage.md', 'Storefront outage runbook: status page first, then roll back', {
    links: ['rollback-procedure', 'nowhere'],
  });
  const rollback = h('reference/rollback-procedure.md', 'Pick the previous release tag in the deploy tool', {
    name: 'Rollback procedure',
  });
  const headers = [runbook, rollback, ...DIR];

  it('shows links in the manifest and fills free slots with the linked memory', async () => {
    let seen = '';
    const selector: MemorySelector = async (request) => {
      seen = request.user;
      return { selected_memories: ['reference_outage.md'] };
    };
    const result = await selectRelevantMemories({ query: 'the storefront is down', headers, selector });
    expect(seen).toContain('reference_outage.md');
    expect(seen).toContain('(links: [[rollback-procedure]], [[nowhere]])');
    expect(result.selected.map((x) => x.filename)).toEqual([
      'reference_outage.md',
      'reference/rollback-procedure.md',
    ]);
    expect(result.linked).toEqual([{ from: 'reference_outage.md', to: 'reference/rollback-procedure.md' }]);
    expect(formatMemoryManifest([runbook])).toMatch(
      /\(links: \[\[rollback-procedure\]\], \[\[nowhere\]\]\)$/,
    );
  });

  it('follows links in the lexical fallback too, but never past five files or into surfaced ones', async () => {
    const failing: MemorySelector = async () => {
      throw new Error('down');
    };
    // The linked procedure shares "release" with the prompt: the link plus one shared word is evidence.
    const result = await selectRelevantMemories({
      query: 'storefront outage runbook after a bad release',
      headers,
      selector: failing,
    });
    expect(result.outcome).toBe('fallback');
    expect(result.selected.map((x) => x.filename)).toEqual([
      'reference_outage.md',
      'reference/rollback-procedure.md',
    ]);
    const surfaced = await selectRelevantMemories({
      query: 'storefront outage runbook after a bad release',
      headers,
      selector: failing,
      alreadySurfaced: ['reference/rollback-procedure.md'],
    });
    expect(surfaced.selected.map((x) => x.filename)).toEqual(['reference_outage.md']);
    const many = h('hub.md', 'hub', { links: DIR.map((d) => d.filename.replace(/\.md$/, '')) });
    const capped = await selectRelevantMemories({
      query: 'x',
      headers: [many, ...DIR],
      selector: async () => ({ selected_memories: ['hub.md'] }),
    });
    expect(capped.selected).toHaveLength(5);
  });

  it('in the fallback, a link alone does not bring in a memory that shares no word with the prompt', async () => {
    const failing: MemorySelector = async () => {
      throw new Error('down');
    };
    // "storefront outage runbook" shares nothing with the rollback procedure; the model path would still
    // follow the link (the model chose the runbook knowing its links), the lexical fallback does not.
    const fallback = await selectRelevantMemories({
      query: 'storefront outage runbook',
      headers,
      selector: failing,
    });
    expect(fallback.selected.map((x) => x.filename)).toEqual(['reference_outage.md']);
    expect(fallback.linked).toEqual([]);
    const model = await selectRelevantMemories({
      query: 'storefront outage runbook',
      headers,
      selector: async () => ({ selected_memories: ['reference_outage.md'] }),
    });
    expect(model.selected.map((x) => x.filename)).toEqual([
      'reference_outage.md',
      'reference/rollback-procedure.md',
    ]);
  });

  it('resolves a link by path, then basename, then name', () => {
    expect(resolveMemoryLink('reference/rollback-procedure', headers)?.filename).toBe(
      'reference/rollback-procedure.md',
    );
    expect(resolveMemoryLink('Rollback Procedure', headers)?.filename).toBe(
      'reference/rollback-procedure.md',
    );
    expect(resolveMemoryLink('rollback-procedure.md', headers)?.filename).toBe(
      'reference/rollback-procedure.md',
    );
    expect(resolveMemoryLink('nowhere', headers)).toBeUndefined();
  });
});

describe('supersession', () => {
  const older = h('project_deploy_day.md', 'Production deploys happen on Tuesday afternoons', {
    name: 'Deploy day schedule',
    mtimeMs: T0 - 60 * DAY,
  });
  const newer = h('topics/deploy_day.md', 'Production deploys moved to Thursday mornings', {
    name: 'Deploy day schedule',
    mtimeMs: T0,
  });

  it('keeps the older version out of the manifest and says the newer one supersedes it', async () => {
    let seen = '';
    const result = await selectRelevantMemories({
      query: 'which day do production deploys happen?',
      headers: [older, newer, ...DIR],
      selector: async (request) => {
        seen = request.user;
        return { selected_memories: ['topics/deploy_day.md', 'project_deploy_day.md'] };
      },
    });
    expect(seen).not.toContain('project_deploy_day.md');
    expect(result.selected.map((x) => x.filename)).toEqual(['topics/deploy_day.md']);
    expect(result.unknownPicks).toEqual(['project_deploy_day.md']);
    expect(result.superseded).toEqual([
      { older: 'project_deploy_day.md', newer: 'topics/deploy_day.md', reason: 'same-name' },
    ]);
    expect(supersessionNotes(result.superseded).get('topics/deploy_day.md')).toMatch(
      /supersedes project_deploy_day\.md/,
    );
    const fallback = await selectRelevantMemories({
      query: 'which day do production deploys happen?',
      headers: [older, newer, ...DIR],
      selector: async () => {
        throw new Error('down');
      },
    });
    const picked = fallback.selected.map((x) => x.filename);
    expect(picked).toContain('topics/deploy_day.md');
    expect(picked).not.toContain('project_deploy_day.md');
    // Without supersession the lexical ranking would have returned the older version too.
    expect(names('which day do production deploys happen?', [older, newer, ...DIR])).toContain(
      'project_deploy_day.md',
    );
  });

  it('honours an explicit supersedes: whatever the names, and frontmatter modified dates over mtimes', () => {
    const a = h('ci_old.md', 'Mobile CI runs on Bitrise', { name: 'Mobile CI' });
    const b = h('ci_new.md', 'Mobile CI runs on GitHub Actions', {
      name: 'CI migration',
      supersedes: ['ci_old'],
    });
    expect([...findSupersessions([a, b]).values()]).toEqual([
      { older: 'ci_old.md', newer: 'ci_new.md', reason: 'explicit' },
    ]);
    const x = h('x.md', 'Kafka topics are named domain.entity.event.v1 in every cluster', {
      name: 'Kafka topic naming rule',
      mtimeMs: T0,
      modifiedMs: T0 - DAY,
    });
    const y = h('y.md', 'Kafka topics are named domain.entity.event.v2 in every cluster', {
      name: 'Kafka topic naming rule',
      mtimeMs: T0 - 5 * DAY,
      modifiedMs: T0,
    });
    expect(findSupersessions([x, y]).get('x.md')).toMatchObject({ newer: 'y.md', reason: 'same-name' });
  });

  it('answers again from what it remembered only while every field it reads is unchanged', () => {
    const headers = [older, newer, ...DIR];
    const first = findSupersessions(headers);
    expect([...first.keys()]).toEqual(['project_deploy_day.md']);
    // The answer is the caller's own copy: changing it changes no later answer.
    first.clear();
    expect([...findSupersessions([...headers]).keys()]).toEqual(['project_deploy_day.md']);
    // A renamed, re-dated or explicitly superseding memory is a new question, answered anew.
    const renamed = { ...older, name: 'Deploy freeze calendar' };
    expect(findSupersessions([renamed, newer, ...DIR]).size).toBe(0);
    const sameDate = { ...older, mtimeMs: newer.mtimeMs };
    expect(findSupersessions([sameDate, newer, ...DIR]).size).toBe(0);
    const claims = { ...DIR[0]!, supersedes: ['reference_ci'] };
    expect(findSupersessions([older, newer, claims, ...DIR.slice(1)]).get('reference_ci.md')).toMatchObject({
      newer: claims.filename,
      reason: 'explicit',
    });
    expect([...findSupersessions(headers).keys()]).toEqual(['project_deploy_day.md']);
  });

  it('does not merge same-template memories about different subjects, but does merge a reworded name', () => {
    // Written from one template: the descriptions overlap far past DESCRIPTION_OVERLAP and the names share
    // two of four words, yet "catalogue" and "wishlist" are two subjects, so neither hides the other.
    const catalogue = h(
      'reference_catalogue_timeout_alerting.md',
      'Alert on the catalogue timeout when it exceeds 42 for ten minutes',
      { name: 'catalogue timeout alerting', type: 'reference', mtimeMs: T0 - 3 * DAY },
    );
    const wishlist = h(
      'reference_wishlist_timeout_alerting.md',
      'Alert on the wishlist timeout when it exceeds 17 for ten minutes',
      { name: 'wishlist timeout alerting', type: 'reference' },
    );
    expect(findSupersessions([catalogue, wishlist]).size).toBe(0);
    // A newer name that only adds a word is the same subject restated.
    const node18 = h('project_node_version.md', 'Storefront runs on Node 18 LTS in production containers', {
      name: 'Node runtime version',
      mtimeMs: T0 - 30 * DAY,
    });
    const node22 = h(
      'project_node_runtime.md',
      'Storefront runs on Node 22 LTS in production containers since the upgrade',
      { name: 'Node runtime version upgrade' },
    );
    expect([...findSupersessions([node18, node22, catalogue, wishlist]).values()]).toEqual([
      { older: 'project_node_version.md', newer: 'project_node_runtime.md', reason: 'near-duplicate' },
    ]);
  });

  it('does not merge memories that only share a subject, a one-word name, a date or a type', () => {
    const checklist = h(
      'cart_checklist.md',
      'Before releasing cart changes update the price snapshot tests',
      {
        name: 'Cart release checklist',
        mtimeMs: T0 - DAY,
      },
    );
    const rollback = h(
      'cart_rollback.md',
      'If a cart release misbehaves disable the cart flag and purge caches',
      {
        name: 'Cart rollback notes',
      },
    );
    const notesA = h('a/notes.md', 'Meeting notes from the planning session', {
      name: 'Notes',
      mtimeMs: T0 - DAY,
    });
    const notesB = h('b/notes.md', 'Notes on the Kafka upgrade', { name: 'Notes' });
    const sameDate = [
      h('p.md', 'Deploys happen on Tuesday', { name: 'Deploy day rule' }),
      h('q.md', 'Deploys happen on Thursday', { name: 'Deploy day rule' }),
    ];
    expect(findSupersessions([checklist, rollback, notesA, notesB, ...sameDate, ...DIR]).size).toBe(0);
  });
});
