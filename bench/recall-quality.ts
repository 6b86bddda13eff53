// Recall quality (issue 19): precision, recall and the empty-when-nothing-relevant rate of recall on the
// labelled evaluation set (bench/lib/recall-eval.ts: three memory directories written to a temp dir and
// scanned with the production scan, prompts labelled with the files that should and should not be recalled).
// Paths measured, each through memory-core's production code:
//   - BM25 alone: `lexicalRank` over the scanned headers with the production floor (no supersession, no
//     links, up to five matches) — the ranking itself;
//   - lexical fallback: `selectRelevantMemories` with a selector that fails, i.e. what recall returns when
//     the model times out (supersession filtering, the relevance floor, the best match only, link filling
//     for linked memories that share a word with the prompt);
//   - scripted selector: `selectRelevantMemories` with the recall job's own `modelSelector` and SDK client,
//     talking to testkit's scripted model server, whose responder reads the request (query + manifest, as a
//     model would) and picks by a fixed rule: entries sharing ≥2 topical words with the query, or one word
//     that at most two entries contain; at most 3, most shared words first. A stand-in, not a model: it
//     measures the selector path (manifest, supersession, link filling, unknown-pick filtering) end to end;
//   - real model: the same with the real API when ANTHROPIC_API_KEY is set (ENGRAM_SMALL_MODEL, default the
//     workers' small model); never required.
// Also prints the calibration sweep of the lexical floor (single-term rule × LEXICAL_MIN_SCORE × how many
// ranked matches the fallback takes), then each single-term rule on every part of the set. Every path is reported on the calibration prompts, on the held-out
// prompts (kind 'held-out', added after the first calibration and not used to pick constants) and on both;
// the targets are checked on the whole set and printed per part. `--misses` lists the fallback's wrong
// picks and missed files per query. Replayable: `--seed N` (default 20261201) fixes the set; the same seed
// gives the same numbers (the real-model numbers excepted). A seed moves only ages and filler numbers.
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { type MemoryHeader, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { isCommonWord } from '@engram/memory-core/recall/common-words';
import {
  LEXICAL_FALLBACK_MATCHES,
  LEXICAL_MIN_SCORE,
  LEXICAL_RELATIVE_FLOOR,
  LEXICAL_SINGLE_TERM_MAX_DF,
  lexicalRank,
} from '@engram/memory-core/recall/lexical';
import { type MemorySelector, selectRelevantMemories } from '@engram/memory-core/recall/select';
import { findSupersessions } from '@engram/memory-core/recall/supersession';
import { topicalTerms } from '@engram/memory-core/text/tokenize';
import { startModelServer } from '@engram/testkit/model-server';
import { jsonReply } from '@engram/testkit/replies';
import { loadWorkersConfig } from '@engram/worker-service/config';
import { createRecallModelClient, modelSelector } from '@engram/worker-service/jobs/recall';
import { buildRecallEval, type EvalQuery, type RecallEval } from './lib/recall-eval.js';

const seedArg = process.argv.indexOf('--seed');
const SEED = seedArg > 0 ? Number(process.argv[seedArg + 1]) : 20261201;
const BASE = Date.UTC(2026, 10, 30, 12, 0, 0);
const DAY = 86_400_000;

function writeDirs(evalSet: RecallEval, root: string): Map<string, string> {
  const dirs = new Map<string, string>();
  for (const dir of evalSet.dirs) {
    const memoryDir = join(root, dir.name, 'memory');
    for (const m of dir.memories) {
      const path = join(memoryDir, m.file);
      mkdirSync(dirname(path), { recursive: true });
      const fm = [
        '---',
        `name: ${JSON.stringify(m.name)}`,
        `description: ${JSON.stringify(m.description)}`,
        `type: ${m.type}`,
        ...(m.supersedes ? [`supersedes: ${JSON.stringify(m.supersedes)}`] : []),
        '---',
        '',
      ];
      writeFileSync(path, `${fm.join('\n')}${m.body}`);
      const t = (BASE - m.ageDays * DAY) / 1000;
      utimesSync(path, t, t);
    }
    writeFileSync(
      join(memoryDir, 'MEMORY.md'),
      dir.memories.map((m) => `- [${m.name}](${m.file})`).join('\n'),
    );
    dirs.set(dir.name, memoryDir);
  }
  return dirs;
}

interface Tally {
  hits: number;
  returned: number;
  relevant: number;
  irrelevantQueries: number;
  irrelevantEmpty: number;
  criticalLeaks: number;
  byKind: Map<string, { hits: number; returned: number; relevant: number; n: number }>;
}

function tally(results: ReadonlyArray<{ q: EvalQuery; picked: string[] }>): Tally {
  const t: Tally = {
    hits: 0,
    returned: 0,
    relevant: 0,
    irrelevantQueries: 0,
    irrelevantEmpty: 0,
    criticalLeaks: 0,
    byKind: new Map(),
  };
  for (const { q, picked } of results) {
    const hits = picked.filter((f) => q.should.includes(f)).length;
    t.hits += hits;
    t.returned += picked.length;
    t.relevant += q.should.length;
    if (q.should.length === 0) {
      t.irrelevantQueries += 1;
      if (picked.length === 0) t.irrelevantEmpty += 1;
    }
    if (picked.some((f) => q.shouldNot.includes(f))) t.criticalLeaks += 1;
    const k = t.byKind.get(q.kind) ?? { hits: 0, returned: 0, relevant: 0, n: 0 };
    k.hits += hits;
    k.returned += picked.length;
    k.relevant += q.should.length;
    k.n += 1;
    t.byKind.set(q.kind, k);
  }
  return t;
}

const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '—');
const ratio = (a: number, b: number) => (b === 0 ? Number.NaN : a / b);

function line(name: string, t: Tally) {
  return `${name.padEnd(29)} precision ${f3(ratio(t.hits, t.returned))}  recall ${f3(ratio(t.hits, t.relevant))}  empty-when-irrelevant ${f3(ratio(t.irrelevantEmpty, t.irrelevantQueries))}  superseded/near-dup leaks ${t.criticalLeaks}  (returned ${t.returned}, hits ${t.hits})`;
}

const isHeldOut = (q: EvalQuery) => q.kind === 'held-out';

/** One line per part of the set: calibration prompts, held-out prompts, all. */
function parts(name: string, results: ReadonlyArray<{ q: EvalQuery; picked: string[] }>) {
  return [
    line(`${name} (calibration)`, tally(results.filter((r) => !isHeldOut(r.q)))),
    line(`${name} (held-out)`, tally(results.filter((r) => isHeldOut(r.q)))),
    line(`${name} (all)`, tally(results)),
  ].join('\n');
}

function kinds(t: Tally) {
  return [...t.byKind]
    .map(([k, v]) => `${k} ${v.n}q p=${f3(ratio(v.hits, v.returned))} r=${f3(ratio(v.hits, v.relevant))}`)
    .join(' · ');
}

/** The scripted selector's rule (see the header comment), applied to the request the SDK sent. */
function scriptedPicks(user: string): string[] {
  const query = /^Query: (.*)$/m.exec(user)?.[1] ?? '';
  const queryTerms = new Set(topicalTerms(query));
  const entries = [...user.matchAll(/^- (?:\[\w+\] )?(\S+\.md) \([^)]*\)(?:: (.*))?$/gm)].map((m) => ({
    file: m[1] as string,
    terms: new Set(topicalTerms(`${(m[1] as string).replace(/[_/.-]/g, ' ')} ${m[2] ?? ''}`)),
  }));
  const df = new Map<string, number>();
  for (const e of entries) for (const t of e.terms) df.set(t, (df.get(t) ?? 0) + 1);
  return entries
    .map((e) => {
      const shared = [...queryTerms].filter((t) => e.terms.has(t));
      const rare = shared.filter((t) => (df.get(t) ?? 0) <= 2).length;
      return { file: e.file, shared: shared.length, rare };
    })
    .filter((e) => e.shared >= 2 || e.rare >= 1)
    .sort((a, b) => b.shared - a.shared || b.rare - a.rare || (a.file < b.file ? -1 : 1))
    .slice(0, 3)
    .map((e) => e.file);
}

async function runSelector(
  evalSet: RecallEval,
  headersByDir: Map<string, MemoryHeader[]>,
  selector: MemorySelector,
  timeoutMs: number,
  concurrency = 1,
) {
  const results: Array<{ q: EvalQuery; picked: string[]; outcome: string }> = new Array(
    evalSet.queries.length,
  );
  let next = 0;
  const lane = async () => {
    while (next < evalSet.queries.length) {
      const i = next++;
      const q = evalSet.queries[i] as EvalQuery;
      const selection = await selectRelevantMemories({
        query: q.query,
        headers: headersByDir.get(q.dir) ?? [],
        selector,
        timeoutMs,
      });
      results[i] = { q, picked: selection.selected.map((h) => h.filename), outcome: selection.outcome };
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return results;
}

const evalSet = buildRecallEval(SEED);
const root = mkdtempSync(join(tmpdir(), 'engram-bench-recall-quality-'));
try {
  const dirs = writeDirs(evalSet, root);
  const headersByDir = new Map<string, MemoryHeader[]>();
  for (const [name, dir] of dirs) {
    const scan = await scanMemoryDir(dir, { cache: false });
    if (scan.problems.length > 0)
      throw new Error(`scan problems in ${name}: ${JSON.stringify(scan.problems)}`);
    headersByDir.set(name, scan.headers);
  }
  const files = [...headersByDir.values()].reduce((n, h) => n + h.length, 0);
  const irrelevant = evalSet.queries.filter((q) => q.should.length === 0).length;
  console.log(
    `recall quality — ${cpus().length} cores, node ${process.version}, seed ${SEED}\n` +
      `set: ${evalSet.dirs.length} memory directories, ${files} files (${[...headersByDir].map(([n, h]) => `${n} ${h.length}`).join(', ')}); ` +
      `${evalSet.queries.length} queries (${evalSet.queries.length - irrelevant} with relevant files, ${irrelevant} with none)\n` +
      `held-out: ${evalSet.queries.filter(isHeldOut).length} of the queries (${evalSet.queries.filter((q) => isHeldOut(q) && q.should.length === 0).length} with none)\n` +
      `lexical floor: LEXICAL_MIN_SCORE ${LEXICAL_MIN_SCORE}, LEXICAL_SINGLE_TERM_MAX_DF ${LEXICAL_SINGLE_TERM_MAX_DF} (sole known word, not common in the prompt's language), LEXICAL_RELATIVE_FLOOR ${LEXICAL_RELATIVE_FLOOR}, fallback takes ${LEXICAL_FALLBACK_MATCHES}\n`,
  );

  // BM25 alone and the calibration sweep (supersession applied, as recall does, so the sweep calibrates the
  // floor the fallback actually uses; links are not followed here). The sweep runs on the calibration
  // prompts only.
  const supersessionsByDir = new Map([...headersByDir].map(([n, h]) => [n, findSupersessions(h)]));
  // 'uncommon sole word' is production (the sole known word, and not a common word of the prompt's probable
  // language); 'uncommon in any language' drops the language guess; 'sole known word' drops the common-word
  // test.
  type SingleTermRule =
    | 'uncommon sole word'
    | 'uncommon in any language'
    | 'sole known word'
    | 'any rare word'
    | 'never';
  const commonTest = (single: SingleTermRule) =>
    single === 'uncommon sole word'
      ? undefined
      : single === 'uncommon in any language'
        ? (term: string) => isCommonWord(term)
        : null;
  const bm25 = (
    minScore: number,
    single: SingleTermRule,
    take: number,
    filter: boolean,
    queries: readonly EvalQuery[],
  ) =>
    queries.map((q) => {
      const sup = supersessionsByDir.get(q.dir) ?? new Map();
      const headers = (headersByDir.get(q.dir) ?? []).filter((h) => !filter || !sup.has(h.filename));
      return {
        q,
        picked: lexicalRank(q.query, headers, {
          minScore,
          singleTermMaxDf: single === 'never' ? 0 : LEXICAL_SINGLE_TERM_MAX_DF,
          singleTermSoleKnown: single !== 'any rare word' && single !== 'never',
          singleTermCommon: commonTest(single),
          limit: take,
        }).map((m) => m.header.filename),
      };
    });
  const calibration = evalSet.queries.filter((q) => !isHeldOut(q));
  console.log('calibration sweep (lexical ranking over the non-superseded candidates, calibration prompts):');
  console.log('        single shared word  min score  takes  precision  recall  empty-when-irrelevant');
  const rules = [
    'uncommon sole word',
    'uncommon in any language',
    'sole known word',
    'any rare word',
    'never',
  ] as const;
  for (const single of rules) {
    for (const minScore of [0.75, 1, 1.25, 1.5]) {
      for (const take of [1, 5]) {
        const t = tally(bm25(minScore, single, take, true, calibration));
        const chosen =
          single === 'uncommon sole word' &&
          minScore === LEXICAL_MIN_SCORE &&
          take === LEXICAL_FALLBACK_MATCHES;
        console.log(
          `  ${single.padStart(24)}  ${String(minScore).padStart(9)}  ${String(take).padStart(5)}  ${f3(ratio(t.hits, t.returned)).padStart(9)}  ${f3(ratio(t.hits, t.relevant)).padStart(6)}  ${f3(ratio(t.irrelevantEmpty, t.irrelevantQueries)).padStart(21)}${chosen ? '  <- chosen' : ''}`,
        );
      }
    }
  }
  console.log('');
  // The single-word rules on every part of the set (the sweep above sees the calibration part only), at the
  // chosen min score and match count.
  console.log(
    'single shared word rule on each part (lexical ranking, non-superseded candidates, best match):',
  );
  for (const single of rules)
    console.log(
      parts(`  ${single}`, bm25(LEXICAL_MIN_SCORE, single, LEXICAL_FALLBACK_MATCHES, true, evalSet.queries)),
    );
  console.log('');

  // The ranking with the production floor but none of the fallback's other rules: every superseded file a
  // candidate, up to five matches within the relative floor, no links.
  console.log(parts('BM25 alone', bm25(LEXICAL_MIN_SCORE, 'uncommon sole word', 5, false, evalSet.queries)));
  const failing: MemorySelector = async () => {
    throw new Error('bench: the selector is down, so the lexical fallback decides');
  };
  const fallbackResults = await runSelector(evalSet, headersByDir, failing, 1000);
  if (fallbackResults.some((r) => r.outcome !== 'fallback'))
    throw new Error('expected every recall to fall back');
  const fallback = tally(fallbackResults);
  const fallbackParts = [
    tally(fallbackResults.filter((r) => !isHeldOut(r.q))),
    tally(fallbackResults.filter((r) => isHeldOut(r.q))),
  ];
  console.log(parts('lexical fallback', fallbackResults));
  console.log(`  by kind: ${kinds(fallback)}`);
  if (process.argv.includes('--misses')) {
    // Every query the fallback got wrong: its wrong picks and the relevant files it missed.
    for (const { q, picked } of fallbackResults) {
      const wrong = picked.filter((f) => !q.should.includes(f));
      const missed = q.should.filter((f) => !picked.includes(f));
      if (wrong.length === 0 && missed.length === 0) continue;
      console.log(
        `    ${q.id} ${q.dir}/${q.kind} "${q.query}"${wrong.length ? `  wrong: ${wrong.join(', ')}` : ''}${missed.length ? `  missed: ${missed.join(', ')}` : ''}`,
      );
    }
  }

  const server = await startModelServer();
  try {
    server.route(
      'selector',
      () => true,
      (request) => {
        const content = request.body.messages[0]?.content;
        const user =
          typeof content === 'string'
            ? content
            : (content ?? []).map((b) => (typeof b.text === 'string' ? b.text : '')).join('\n');
        return jsonReply({ selected_memories: scriptedPicks(user) });
      },
    );
    const config = loadWorkersConfig({
      ANTHROPIC_API_KEY: 'bench',
      ANTHROPIC_BASE_URL: server.url,
      LOG_LEVEL: 'silent',
    });
    const scripted = await runSelector(
      evalSet,
      headersByDir,
      modelSelector(createRecallModelClient(config), config.smallModel),
      10_000,
    );
    if (scripted.some((r) => r.outcome !== 'model'))
      throw new Error('the scripted selector must answer every query');
    const t = tally(scripted);
    console.log(parts('scripted selector', scripted));
    console.log(`  by kind: ${kinds(t)}`);
  } finally {
    await server.close();
  }

  if (process.env.ANTHROPIC_API_KEY) {
    const config = loadWorkersConfig(process.env);
    const client = createModelClient({
      apiKey: process.env.ANTHROPIC_API_KEY,
      ...(config.anthropic.baseURL ? { baseURL: config.anthropic.baseURL } : {}),
      maxRetries: 2,
    });
    const real = await runSelector(
      evalSet,
      headersByDir,
      modelSelector(client, config.smallModel),
      30_000,
      4,
    );
    const t = tally(real);
    const fellBack = real.filter((r) => r.outcome !== 'model').length;
    console.log(parts(`model ${config.smallModel}`, real));
    console.log(`  by kind: ${kinds(t)}${fellBack ? ` (${fellBack} recalls fell back to lexical)` : ''}`);
  } else {
    console.log('real model: skipped (set ANTHROPIC_API_KEY to measure the small model on the same set)');
  }

  const meets = (t: Tally) =>
    ratio(t.hits, t.returned) >= 0.9 &&
    ratio(t.hits, t.relevant) >= 0.6 &&
    ratio(t.irrelevantEmpty, t.irrelevantQueries) >= 0.95;
  const ok = meets(fallback);
  const [calibrationTally, heldOutTally] = fallbackParts as [Tally, Tally];
  console.log(
    `\ntargets (lexical fallback, whole set): precision >= 0.9 at recall >= 0.6, empty-when-irrelevant >= 0.95 — ${ok ? 'met' : 'NOT MET'}` +
      ` (calibration part ${meets(calibrationTally) ? 'met' : 'not met'}, held-out part ${meets(heldOutTally) ? 'met' : 'not met'})`,
  );
  if (!ok) process.exitCode = 1;
} finally {
  rmSync(root, { recursive: true, force: true });
}
