// git's option tables and checks for the read-only classifier: global options, the read-only subcommands and
// their options as git's parse-options parses them.

import { type Check, type Context, deny, withOptions, words } from './bash-check.js';
import { type OptionTable, parseOptions, optionTable as t } from './bash-options.js';
import type { Arg } from './bash-parse.js';

// ---------------------------------------------------------------- git

const GIT_GLOBAL_SAFE = new Set(
  words(
    '--no-pager -P --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs ' +
      '--icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice --version --bare',
  ),
);
const GIT_GLOBAL_DENY: Record<string, string> = {
  '-C': 'runs in another directory, whose repository configuration can run programs',
  '-c': 'sets configuration, which can run programs (core.pager, diff.external, core.fsmonitor)',
  '--git-dir': 'uses another repository, whose configuration can run programs',
  '--work-tree': 'uses another work tree',
  '--exec-path': 'runs git commands from another directory',
  '--config-env': 'sets configuration, which can run programs',
  '--namespace': 'uses another ref namespace',
  '-p': 'forces the pager (a program from the configuration)',
  '--paginate': 'forces the pager (a program from the configuration)',
};

/** A `--format` / `--pretty` value: `%G…` placeholders and `%(signature…)` run gpg. */
function gitFormatCheck(v: Arg | undefined): string | undefined {
  if (!v) return undefined;
  if (!v.exact) return 'a format with a pattern in it';
  if (/%G|%\(signature/.test(v.text)) return 'signature placeholders run gpg';
  const builtin = words('oneline short medium full fuller reference email raw mboxrd');
  if (!builtin.includes(v.text) && !/^t?format:/.test(v.text) && !v.text.includes('%'))
    return 'a named format from the configuration';
  return undefined;
}

const DIFF_LONG =
  'patch no-patch unified= output= output-indicator-new= output-indicator-old= output-indicator-context= raw ' +
  'patch-with-raw indent-heuristic no-indent-heuristic minimal patience histogram anchored= diff-algorithm= ' +
  'stat? compact-summary numstat shortstat dirstat? cumulative dirstat-by-file? summary patch-with-stat ' +
  'name-only name-status submodule? color? no-color color-moved? no-color-moved color-moved-ws= ' +
  'no-color-moved-ws word-diff? word-diff-regex= color-words? no-renames rename-empty no-rename-empty check ' +
  'ws-error-highlight= full-index binary abbrev? no-abbrev break-rewrites? find-renames? find-copies? ' +
  'find-copies-harder irreversible-delete diff-filter= find-object= pickaxe-all pickaxe-regex skip-to= ' +
  'rotate-to= relative? no-relative text ignore-cr-at-eol ignore-space-at-eol ignore-space-change ' +
  'ignore-all-space ignore-blank-lines ignore-matching-lines= inter-hunk-context= function-context exit-code ' +
  'quiet ext-diff no-ext-diff textconv no-textconv ignore-submodules? src-prefix= dst-prefix= no-prefix ' +
  'default-prefix line-prefix= ita-invisible-in-index ita-visible-in-index stat-width= stat-name-width= ' +
  'stat-graph-width= stat-count= merge-base cached staged no-index base ours theirs cc combined-all-paths ' +
  'diff-merges= no-diff-merges remerge-diff dd';
const LOG_LONG =
  'oneline pretty? format= abbrev-commit no-abbrev-commit encoding= expand-tabs? no-expand-tabs notes? ' +
  'no-notes show-notes? standard-notes no-standard-notes show-signature relative-date date= parents children ' +
  'left-right graph no-graph show-linear-break? decorate? no-decorate decorate-refs= decorate-refs-exclude= ' +
  'clear-decorations source use-mailmap mailmap no-use-mailmap no-mailmap log-size max-count= skip= since= ' +
  'after= since-as-filter= until= before= author= committer= grep-reflog= grep= all-match invert-grep ' +
  'regexp-ignore-case basic-regexp extended-regexp fixed-strings perl-regexp remove-empty merges no-merges ' +
  'min-parents= max-parents= no-min-parents no-max-parents first-parent exclude-first-parent-only not all ' +
  'branches? tags? remotes? glob= exclude= exclude-hidden= reflog alternate-refs single-worktree ' +
  'ignore-missing bisect cherry-mark cherry-pick left-only right-only cherry walk-reflogs merge boundary ' +
  'simplify-by-decoration show-pulls full-history dense sparse simplify-merges ancestry-path? date-order ' +
  'author-date-order topo-order reverse no-walk? do-walk follow no-follow full-diff max-age= min-age= count ' +
  'objects objects-edge unpacked header timestamp';
const GIT_DIFF_DENY = {
  '--output': 'writes a file',
  '--ext-diff': 'runs an external diff program',
  '--textconv': 'runs text conversion filters',
};
const LOG_CHECKS = { '--format': gitFormatCheck, '--pretty': gitFormatCheck };

const GIT_LOG = t('pusU:zWM::C::B::DS:G:O:l:RabwX::n:iEFPgmctrL:', `${DIFF_LONG} ${LOG_LONG}`, {
  digits: true,
  negatable: true,
  deny: { ...GIT_DIFF_DENY, '--show-signature': 'runs gpg' },
  check: LOG_CHECKS,
});
const GIT_DIFF = t('pusU:zWM::C::B::DS:G:O:l:RabwX::cmtr0123', DIFF_LONG, {
  negatable: true,
  deny: GIT_DIFF_DENY,
});
const GIT_SHORTLOG = t('nsecw::', `numbered summary email committer group= format= ${LOG_LONG}`, {
  negatable: true,
  deny: { '--show-signature': 'runs gpg' },
  check: LOG_CHECKS,
});

const GIT: Record<string, Check> = {
  status: withOptions(
    t(
      'sbu::vz',
      'short branch show-stash porcelain? long verbose untracked-files? ignore-submodules? ignored? column? ' +
        'no-column ahead-behind no-ahead-behind renames no-renames find-renames? null',
      { negatable: true },
    ),
  ),
  log: withOptions(GIT_LOG),
  show: withOptions(GIT_LOG),
  whatchanged: withOptions(GIT_LOG),
  'rev-list': withOptions(GIT_LOG),
  diff: withOptions(GIT_DIFF),
  'diff-tree': withOptions(GIT_DIFF),
  'diff-index': withOptions(GIT_DIFF),
  'diff-files': withOptions(GIT_DIFF),
  shortlog: withOptions(GIT_SHORTLOG),
  blame: withOptions(
    t(
      'bcflnpstweL:S:M::C::',
      'root show-stats score-debug show-name show-number porcelain line-porcelain incremental encoding= ' +
        'contents= date= progress no-progress reverse first-parent minimal abbrev? color-lines color-by-age ' +
        'ignore-rev= ignore-revs-file= textconv no-textconv show-email',
      { negatable: true, deny: { '--textconv': 'runs text conversion filters' } },
    ),
  ),
  grep: withOptions(
    t(
      'aiIwvhHEGPFnlLcz0oqWprA:B:C:e:f:m:O::',
      'cached no-index untracked exclude-standard no-exclude-standard recurse-submodules text textconv ' +
        'no-textconv ignore-case word-regexp invert-match full-name extended-regexp basic-regexp perl-regexp ' +
        'fixed-strings line-number column files-with-matches name-only files-without-match count color? ' +
        'no-color break heading show-function function-context context= after-context= before-context= ' +
        'threads= max-depth= max-count= and or not all-match quiet null only-matching open-files-in-pager? ' +
        'recursive no-recursive',
      {
        digits: true,
        negatable: true,
        deny: {
          '-O': 'opens the files in a pager (a program)',
          '--open-files-in-pager': 'opens the files in a pager (a program)',
          '--textconv': 'runs text conversion filters',
        },
      },
    ),
  ),
  'ls-files': withOptions(
    t(
      'cdmoiskuvtfzeX:x:',
      'cached deleted modified others ignored stage killed directory no-empty-directory unmerged resolve-undo ' +
        'exclude= exclude-from= exclude-per-directory= exclude-standard error-unmatch with-tree= full-name ' +
        'recurse-submodules abbrev? debug deduplicate eol sparse format=',
      { negatable: true },
    ),
  ),
  'ls-tree': withOptions(
    t('dlrtz', 'long name-only name-status object-only full-name full-tree abbrev? format=', {
      negatable: true,
    }),
  ),
  'cat-file': withOptions(
    t(
      'tsepzZ',
      'batch? batch-check? batch-command? batch-all-objects buffer unordered follow-symlinks allow-unknown-type ' +
        'mailmap use-mailmap textconv filters path=',
      {
        negatable: true,
        deny: { '--textconv': 'runs text conversion filters', '--filters': 'runs content filters' },
      },
    ),
  ),
  'rev-parse': () => {}, // only prints: every option is a query
  describe: withOptions(
    t(
      '',
      'dirty? broken? all tags contains abbrev= candidates= exact-match debug long match= exclude= always first-parent',
      { negatable: true },
    ),
  ),
  'name-rev': withOptions(
    t('', 'tags refs= exclude= all undefined always name-only annotate-stdin stdin', { negatable: true }),
  ),
  'merge-base': withOptions(t('a', 'all octopus independent is-ancestor fork-point', { negatable: true })),
  'for-each-ref': withOptions(
    t(
      '',
      'count= shell perl python tcl sort= format= color? points-at= merged~ no-merged~ contains~ no-contains~ ' +
        'ignore-case omit-empty exclude= include-root-refs stdin',
      { negatable: true, check: { '--format': gitFormatCheck } },
    ),
  ),
  'show-ref': withOptions(
    t('dqs::', 'heads tags branches verify exists hash? abbrev? dereference quiet exclude-existing? head', {
      negatable: true,
    }),
  ),
  'count-objects': withOptions(t('vH', 'verbose human-readable', { negatable: true })),
  version: withOptions(t('', 'build-options')),
  'check-ignore': withOptions(t('qvnz', 'quiet verbose non-matching no-index stdin', { negatable: true })),
  'check-attr': withOptions(t('az', 'all cached stdin source=', { negatable: true })),
  cherry: withOptions(t('v', 'abbrev?', { negatable: true })),
  'show-branch': withOptions(
    t(
      'arg::',
      'all remotes topo-order date-order current color? no-color more? list merge-base independent no-name ' +
        'sha1-name sparse reflog? topics',
      { negatable: true },
    ),
  ),
  branch: (args) =>
    gitListing(
      args,
      t(
        'arlvidDmMcCfuqt',
        'all remotes list verbose ignore-case color? no-color column? no-column sort= contains~ no-contains~ ' +
          'merged~ no-merged~ points-at= format= show-current omit-empty abbrev= no-abbrev delete move copy ' +
          'force set-upstream-to= set-upstream unset-upstream edit-description track? no-track create-reflog ' +
          'recurse-submodules quiet',
        {
          negatable: true,
          check: { '--format': gitFormatCheck },
          deny: Object.fromEntries(
            words(
              '-d -D -m -M -c -C -f -u -t -q --delete --move --copy --force --set-upstream-to --set-upstream ' +
                '--unset-upstream --edit-description --track --no-track --create-reflog --recurse-submodules --quiet',
            ).map((k) => [k, 'changes branches']),
          ),
        },
      ),
    ),
  tag: (args) =>
    gitListing(
      args,
      t(
        'ln::idasufmFev',
        'list sort= contains~ no-contains~ merged~ no-merged~ points-at= format= color? column? no-column ' +
          'ignore-case omit-empty delete annotate sign local-user= force message= file= edit create-reflog ' +
          'cleanup= verify',
        {
          negatable: true,
          check: { '--format': gitFormatCheck },
          deny: Object.fromEntries(
            words(
              '-d -a -s -u -f -m -F -e -v --delete --annotate --sign --local-user --force --message --file ' +
                '--edit --create-reflog --cleanup --verify',
            ).map((k) => [k, k === '-v' || k === '--verify' ? 'runs gpg' : 'changes tags']),
          ),
        },
      ),
    ),
  remote: (args) => {
    const [sub, ...rest] = args;
    if (!sub || (sub.exact && (sub.text === '-v' || sub.text === '--verbose') && rest.length === 0)) return;
    if (sub.text === 'get-url') return void parseOptions(t('', 'push all'), rest);
    // Without -n, `remote show` contacts the remote (running the configured transport).
    if (sub.text === 'show' && rest.some((a) => a.text === '-n')) return;
    deny(`git remote ${sub.text} changes remotes or contacts them`);
  },
  stash: (args) => {
    const [sub, ...rest] = args;
    if (sub?.text === 'list') return void parseOptions(GIT_LOG, rest);
    if (sub?.text === 'show') return void parseOptions(GIT_DIFF, rest);
    deny('git stash changes the stash and the work tree');
  },
  worktree: (args) => {
    if (args[0]?.text !== 'list') deny('git worktree changes work trees');
    parseOptions(t('vz', 'porcelain verbose expire='), args.slice(1));
  },
  reflog: (args) => {
    const sub = args[0]?.text;
    if (sub === 'exists') return;
    if (sub === undefined || sub === 'show') return void parseOptions(GIT_LOG, args.slice(1));
    if (args[0]!.exact && sub.startsWith('-')) return void parseOptions(GIT_LOG, args);
    deny(`git reflog ${sub} changes the reflog`);
  },
  submodule: (args) => {
    if (args[0]?.text !== 'status') deny('git submodule changes submodules');
    parseOptions(t('q', 'cached recursive quiet'), args.slice(1));
  },
  notes: (args) => {
    if (!['list', 'show'].includes(args[0]?.text ?? '')) deny('git notes changes notes');
    parseOptions(t('', ''), args.slice(1));
  },
  'symbolic-ref': (args) => {
    const parsed = parseOptions(
      t('qdm:', 'quiet short no-recurse delete', {
        deny: { '-d': 'deletes a ref', '--delete': 'deletes a ref', '-m': 'changes a ref' },
      }),
      args,
    );
    if (parsed.operands.length !== 1 || parsed.operands[0]!.multi)
      deny('git symbolic-ref NAME REF changes a ref');
  },
  config: gitConfig,
  var: (args) => {
    if (args.some((a) => a.text.startsWith('-') && a.text !== '-l')) deny('unknown option');
  },
};

/** `git branch` / `git tag` list unless given a name without `--list`, or a writing option. */
function gitListing(args: Arg[], table: OptionTable): void {
  const parsed = parseOptions(table, args);
  const listing = parsed.options.some((o) => o.def.name === 'l' || o.def.name === 'list');
  const showCurrent = parsed.options.some((o) => o.def.name === 'show-current');
  if (parsed.operands.length > 0 && !listing && !showCurrent) deny('a name without --list creates it');
}

const GIT_CONFIG = t(
  'lzf:e',
  'get get-all get-regexp get-urlmatch list get-color get-colorbool global system local worktree file= blob= ' +
    'type= bool int bool-or-int path expiry-date null name-only show-origin show-scope includes default= ' +
    'fixed-value add unset unset-all replace-all rename-section remove-section edit',
  {
    negatable: true,
    deny: Object.fromEntries(
      words('--add --unset --unset-all --replace-all --rename-section --remove-section -e --edit').map(
        (k) => [k, 'changes configuration'],
      ),
    ),
  },
);

function gitConfig(args: Arg[]): void {
  const parsed = parseOptions(GIT_CONFIG, args);
  const reads = words('get get-all get-regexp get-urlmatch list l get-color get-colorbool');
  if (parsed.options.some((o) => reads.includes(o.def.name))) return;
  const first = parsed.operands[0];
  if (first?.exact && ['get', 'list'].includes(first.text)) return;
  if (parsed.operands.length === 1 && first?.exact && first.text.includes('.')) return; // legacy `git config KEY`
  deny('git config with a value or a subcommand other than get/list changes configuration');
}

export function gitCheck(args: Arg[], ctx: Context): void {
  // After `--` every word is a path to git, whatever it expands to.
  const end = args.findIndex((a) => a.exact && a.text === '--');
  const optionWords = end < 0 ? args : args.slice(0, end);
  if (optionWords.some((a) => !a.exact && !a.dashSafe)) deny('a pattern that may expand to a git option');
  let k = 0;
  for (; k < args.length; k++) {
    const a = args[k]!;
    if (!a.exact || !a.text.startsWith('-')) break;
    const name = a.text.split('=')[0]!;
    if (GIT_GLOBAL_DENY[name]) deny(`git ${name} ${GIT_GLOBAL_DENY[name]}`);
    if (!GIT_GLOBAL_SAFE.has(a.text)) deny(`git ${a.text} is not a known read-only git option`);
    if (a.text === '--version') return;
  }
  const sub = args[k];
  if (!sub) deny('git without a subcommand');
  const check = sub!.exact ? GIT[sub!.text] : undefined;
  if (!check) deny(`git ${sub!.text} is not a known read-only git subcommand`);
  check!(args.slice(k + 1), { ...ctx, depth: 0 });
}
