// Decides whether a shell command line only reads. It is a filter, not the boundary: memory forks run Bash
// inside the OS sandbox whatever this says; the foreground uses it to decide what runs without asking.
//
// The line is parsed by tree-sitter-bash (bash-parse.ts); only plain words and plain quoted strings are
// accepted, in lists, pipelines and subshells of simple commands. Each simple command's program must be in
// the table below, and its arguments are parsed against that program's option table as getopt_long / git's
// parse-options would parse them (bash-options.ts): option clusters, attached values, long-option
// abbreviations. An unknown program, an unknown option, an option that writes or executes, or anything the
// parser cannot see through makes the answer "not read-only". A false "no" costs a prompt or a denied call;
// a false "yes" would be a bug.

import { OptionRefusal, type OptionTable, parseOptions, optionTable as t } from './bash-options.js';
import { type Arg, parseBashLine, type Redirect, type SimpleCommand, Unanalysable } from './bash-parse.js';

class NotReadOnly extends Error {
  override readonly name = 'NotReadOnly';
}

const deny = (why: string): never => {
  throw new NotReadOnly(why);
};

/** Lists below are written as space-separated words to stay readable. */
function words(list: string): string[] {
  return list.split(/\s+/).filter(Boolean);
}

/** Variables that may be set for a read-only command: they change formatting, never what runs. */
const SAFE_ASSIGNMENTS = /^(LC_[A-Z]+|LANG|LANGUAGE|TZ|NO_COLOR|TERM|COLUMNS|LINES|GREP_COLOR|GREP_COLORS)$/;

// ---------------------------------------------------------------- redirections

/**
 * `>/dev/null` (and `2>`, `>>`, `&>`, `>|` to it) is accepted: opening the null device for writing, even with
 * truncation, changes nothing. Only the literal path counts. Input from a file is reading, except bash's
 * `/dev/tcp` and `/dev/udp` pseudo-files, which open network connections.
 */
function checkRedirect(r: Redirect): void {
  const target = r.target;
  switch (r.op) {
    case '<':
      if (!target || target.multi) deny('reads from a pattern');
      if (/^\/dev\/(tcp|udp)\//.test(target!.text)) deny('opens a network connection');
      return;
    case '>&-':
    case '<&-':
    case '<<<':
      return; // closing a descriptor; a here-string is read
    case '<&':
    case '>&':
      if (target?.exact && /^(\d+|-)$/.test(target.text)) return; // 2>&1, >&2, <&0
      if (r.op === '>&' && target?.exact && target.text === '/dev/null') return;
      deny('writes through a redirection');
      return;
    case '>':
    case '>>':
    case '>|':
    case '&>':
    case '&>>':
      if (target?.exact && target.text === '/dev/null') return;
      deny('writes through a redirection');
      return;
    default:
      deny(`redirection ${r.op}`);
      return;
  }
}

// ---------------------------------------------------------------- program specs

interface Context {
  depth: number;
}

/** Returns normally when the program with these arguments only reads; throws NotReadOnly otherwise. */
type Check = (args: Arg[], ctx: Context) => void;

const allArgsAreWords: Check = () => {};

/** Options from `table`; operands are files or other inputs read (any number, patterns allowed). */
const withOptions =
  (table: OptionTable, operands?: (ops: Arg[], parsed: ReturnType<typeof parseOptions>) => void): Check =>
  (args) => {
    const parsed = parseOptions(table, args);
    operands?.(parsed.operands, parsed);
  };

const noOperands = (ops: Arg[]) => {
  if (ops.length > 0) deny('an operand here changes state');
};

const atMostOperands = (n: number) => (ops: Arg[]) => {
  if (ops.some((o) => o.multi) || ops.length > n) deny(`more than ${n} operand(s): the next one is written`);
};

const TABLES = {
  cat: t(
    'AbeEnstTuv',
    'show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting help version',
  ),
  head: t('c:n:qvz', 'bytes= lines= quiet silent verbose zero-terminated help version', { digits: true }),
  tail: t(
    'c:f::Fn:qs:vz',
    'bytes= follow? lines= max-unchanged-stats= pid= quiet silent retry sleep-interval= verbose zero-terminated help version',
    { digits: true },
  ),
  wc: t('cmlLw', 'bytes chars lines files0-from= max-line-length words total= help version'),
  ls: t(
    'aAbBcCdDfF::gGhHiI:klLmnNop:qQrRsStT:uUvw:xXZ1',
    'all almost-all author escape block-size= ignore-backups color? directory dired classify? file-type format= ' +
      'full-time group-directories-first no-group human-readable si dereference-command-line ' +
      'dereference-command-line-symlink-to-dir hide= hyperlink? indicator-style= inode ignore= kibibytes ' +
      'dereference numeric-uid-gid literal hide-control-chars show-control-chars quote-name quoting-style= ' +
      'reverse recursive size sort= time= time-style= tabsize= width= context zero help version',
  ),
  stat: t('Lfc:t', 'dereference file-system cached= format= printf= terse help version'),
  du: t(
    '0aB:bcDd:HhkLlmPSst:X:x',
    'null all apparent-size block-size= bytes total dereference-args max-depth= files0-from= human-readable ' +
      'inodes dereference count-links no-dereference separate-dirs si summarize threshold= time? time-style= ' +
      'exclude-from= exclude= one-file-system help version',
  ),
  df: t(
    'aB:hHiklPt:Tx:v',
    'all block-size= human-readable si inodes local no-sync output? portability sync total type= print-type ' +
      'exclude-type= help version',
  ),
  basename: t('as:z', 'multiple suffix= zero help version'),
  dirname: t('z', 'zero help version'),
  realpath: t(
    'emLPqsz',
    'canonicalize-existing canonicalize-missing logical physical quiet relative-to= relative-base= strip ' +
      'no-symlinks zero help version',
  ),
  readlink: t(
    'femnqsvz',
    'canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent verbose zero help version',
  ),
  nl: t(
    'b:d:f:h:i:l:n:ps:v:w:',
    'body-numbering= section-delimiter= footer-numbering= header-numbering= line-increment= join-blank-lines= ' +
      'number-format= no-renumber number-separator= starting-line-number= number-width= help version',
  ),
  cut: t(
    'b:c:d:f:nsz',
    'bytes= characters= delimiter= fields= complement only-delimited output-delimiter= zero-terminated help version',
  ),
  tr: t('cCdst', 'complement delete squeeze-repeats truncate-set1 help version'),
  grep: t(
    'EFGPe:f:iyw xzsvVm:bnHhoqaId:D:rRLlcTZB:A:C:U'.replace(' ', ''),
    'extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case no-ignore-case ' +
      'word-regexp line-regexp null-data no-messages invert-match version help max-count= byte-offset ' +
      'line-number no-line-number line-buffered with-filename no-filename label= only-matching quiet silent ' +
      'binary-files= text directories= devices= recursive dereference-recursive include= exclude= exclude-from= ' +
      'exclude-dir= files-without-match files-with-matches count initial-tab null before-context= ' +
      'after-context= context= group-separator= no-group-separator color? colour? binary',
    { digits: true },
  ),
  sum: t('bctzw', 'binary check tag text zero ignore-missing quiet status strict warn help version'),
  cksum: t(
    'a:cl:zw',
    'algorithm= base64 check length= raw tag untagged zero ignore-missing quiet status strict warn debug help version',
  ),
  b2sum: t(
    'bcl:tzw',
    'binary check length= tag text zero ignore-missing quiet status strict warn help version',
  ),
  column: t(
    'tn:O:C:N:l:E:dHeR:T:W:LJri:p:c:o:s:xhV',
    'table table-name= table-order= table-column= table-columns= table-columns-limit= table-noextreme= ' +
      'table-noheadings table-header-repeat table-hide= table-right= table-truncate= table-wrap= ' +
      'keep-empty-lines json tree= tree-id= tree-parent= output-width= output-separator= separator= ' +
      'input-separator= fillrows help version',
  ),
  fold: t('bsw:', 'bytes spaces width= help version', { digits: true }),
  paste: t('d:sz', 'delimiters= serial zero-terminated help version'),
  expand: t('it:', 'initial tabs= help version', { digits: true }),
  unexpand: t('at:', 'all first-only tabs= help version', { digits: true }),
  tac: t('brs:', 'before regex separator= help version'),
  od: t(
    'A:j:N:S::t:vw::abcdfilosx',
    'address-radix= endian= skip-bytes= read-bytes= strings? format= output-duplicates width? traditional help version',
  ),
  hexdump: t(
    'bcCde:f:L::n:os:vxX',
    'one-byte-octal one-byte-char one-byte-hex canonical two-bytes-decimal format= format-file= color? ' +
      'length= two-bytes-octal skip= no-squeezing two-bytes-hex help version',
  ),
  strings: t(
    'adfn:t:e:oT:ws:U:hvV',
    'all data print-file-name bytes= radix= encoding= target= include-all-whitespace output-separator= ' +
      'unicode= help version',
    { digits: true },
  ),
  seq: t('f:s:w', 'format= separator= equal-width help version'),
  uname: t(
    'asnrvmpio',
    'all kernel-name nodename kernel-release kernel-version machine processor hardware-platform ' +
      'operating-system help version',
  ),
  id: t('aZgGnruz', 'context group groups name real user zero help version'),
  printenv: t('0', 'null help version'),
  diff: t(
    'qsc::C:u::U:enyW:pF:tTlrNx:X:S:iEZbwBI:aD:dv',
    'normal brief report-identical-files context? unified? ed rcs side-by-side width= left-column ' +
      'suppress-common-lines show-c-function show-function-line= label= expand-tabs initial-tab tabsize= ' +
      'suppress-blank-empty paginate recursive no-dereference new-file unidirectional-new-file ' +
      'ignore-file-name-case no-ignore-file-name-case exclude= exclude-from= starting-file= from-file= to-file= ' +
      'ignore-case ignore-tab-expansion ignore-trailing-space ignore-space-change ignore-all-space ' +
      'ignore-blank-lines ignore-matching-lines= text strip-trailing-cr ifdef= old-group-format= ' +
      'new-group-format= unchanged-group-format= changed-group-format= line-format= old-line-format= ' +
      'new-line-format= unchanged-line-format= minimal horizon-lines= speed-large-files color? palette= ' +
      'help version',
  ),
  cmp: t('bi:ln:sv', 'print-bytes ignore-initial= verbose bytes= quiet silent help version'),
  comm: t('123z', 'check-order nocheck-order output-delimiter= total zero-terminated help version'),
  join: t('a:e:ij:o:t:v:1:2:z', 'ignore-case check-order nocheck-order header zero-terminated help version'),
  fmt: t(
    'cp:stuw:g:',
    'crown-margin prefix= split-only tagged-paragraph uniform-spacing width= goal= help version',
    {
      digits: true,
    },
  ),
  numfmt: t(
    'd:zM',
    'debug delimiter= field= format= from= from-unit= grouping header? invalid= padding= round= suffix= to= ' +
      'to-unit= zero-terminated help version',
  ),
  who: t(
    'abdHlmpqrstTwu',
    'all boot dead heading ips login lookup process count runlevel short time mesg users message writable help version',
  ),
  nproc: t('', 'all ignore= help version'),
  pgrep: t(
    'd:lavwcfg:G:inoO:P:s:t:u:U:xF:LrAhV',
    'delimiter= list-name list-full inverse lightweight count full pgroup= group= ignore-case newest oldest ' +
      'older= parent= session= terminal= euid= uid= exact pidfile= logpidfile runstates= ignore-ancestors ' +
      'cgroup= ns= nslist= help version',
  ),
  pwd: t('LP', 'logical physical help version'),
  whoami: t('', 'help version'),
  tty: t('s', 'silent quiet help version'),
  logname: t('', 'help version'),
  arch: t('', 'help version'),
  groups: t('', 'help version'),
  users: t('', 'help version'),
  uptime: t('phsV', 'pretty help since version'),
  free: t(
    'bkmghltvs:c:wV',
    'bytes kilo mega giga tera peta kibi mebi gibi tebi pebi human si lohi line total committed seconds= count= ' +
      'wide help version',
  ),
  which: t('as', ''),
  type: t('afptP', ''),
  cd: t('LPe@', ''),
  tsort: t('', 'help version'),
  rev: t('0hV', 'zero help version'),
  zcat: t('fhlLqrtvV', 'force help list license quiet recursive test verbose version'),
  base64: t('diw:', 'decode ignore-garbage wrap= help version'),
  base32: t('diw:', 'decode ignore-garbage wrap= help version'),
} satisfies Record<string, OptionTable>;

/**
 * `sort`: `-o`/`--output` writes a file; `--compress-program` runs a program; `-T` writes temporary files
 * into a directory of the caller's choice.
 */
const SORT = t(
  'bdfgiMhnRrVcCk:mo:sS:t:T:uz',
  'ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting month-sort ' +
    'human-numeric-sort numeric-sort random-sort random-source= reverse sort= version-sort batch-size= check? ' +
    'compress-program= debug files0-from= key= merge output= stable buffer-size= field-separator= ' +
    'temporary-directory= parallel= unique zero-terminated help version',
  {
    deny: {
      '-o': 'writes its output to a file',
      '--output': 'writes its output to a file',
      '--compress-program': 'runs a program',
      '-T': 'writes temporary files into a chosen directory',
      '--temporary-directory': 'writes temporary files into a chosen directory',
    },
  },
);

/** `uniq IN OUT` writes OUT: at most one operand. */
const UNIQ = t(
  'cdDf:is:uzw:',
  'count repeated all-repeated? skip-fields= group? ignore-case skip-chars= unique zero-terminated check-chars= help version',
  { digits: true },
);

/** `date -s` / `--set` and a non-`+FORMAT` operand set the clock. */
const DATE = t(
  'd:f:I::Rr:s:u',
  'date= debug file= iso-8601? resolution rfc-email rfc-3339= reference= set= utc universal help version',
  { deny: { '-s': 'sets the system clock', '--set': 'sets the system clock' } },
);

/** `tree -o FILE` writes FILE; `-R` (with `-H`) writes `00Tree.html` into every directory. */
const TREE = t(
  'adlfxL:RP:I:qNQpugshDFvtcUrSnCXJH:T:iAo:',
  'gitignore gitfile= ignore-case matchdirs metafirst prune info infofile= noreport charset= filelimit= ' +
    'timefmt= si du inodes device dirsfirst filesfirst sort= fromfile fromtabfile fflinks nolinks hintro= ' +
    'houtro= opt-toggle hyperlink scheme= authority= help version',
  { deny: { '-o': 'writes its output to a file', '-R': 'writes 00Tree.html files' } },
);

/**
 * `file -C` compiles a magic file (writes `*.mgc`); `-S`/`--no-sandbox` lifts file's own seccomp jail; `-z`
 * runs decompression programs.
 */
const FILE = t(
  'vm:zZbce:f:F:iklLhnN0pP:rsSCd',
  'help version magic-file= uncompress uncompress-noreport brief checking-printout exclude= exclude-quiet= ' +
    'files-from= separator= mime apple extension mime-type mime-encoding keep-going list dereference ' +
    'no-dereference no-buffer no-pad print0 preserve-date parameter= raw special-files no-sandbox compile debug',
  {
    deny: {
      '-C': 'writes a compiled magic file',
      '--compile': 'writes a compiled magic file',
      '-S': 'disables its sandbox',
      '--no-sandbox': 'disables its sandbox',
      '-z': 'runs decompression programs',
      '-Z': 'runs decompression programs',
      '--uncompress': 'runs decompression programs',
      '--uncompress-noreport': 'runs decompression programs',
    },
  },
);

/** ripgrep: `--pre` runs a program per file; `--hostname-bin` and `-z` (decompressors) run programs. */
const RG = t(
  'A:B:bC:cd:E:e:f:Fg:HhiIj:LlM:m:NnopqRr:SsT:t:uUVvwxz0a',
  'after-context= auto-hybrid-regex before-context= binary block-buffered byte-offset case-sensitive color= ' +
    'colors= column context= context-separator= count count-matches crlf debug dfa-size-limit= encoding= ' +
    'engine= field-context-separator= field-match-separator= file= files files-with-matches ' +
    'files-without-match fixed-strings follow glob= glob-case-insensitive heading hidden iglob= ignore-case ' +
    'ignore-file= ignore-file-case-insensitive include-zero invert-match json line-buffered line-number ' +
    'line-regexp max-columns= max-columns-preview max-count= max-depth= max-filesize= mmap multiline ' +
    'multiline-dotall no-config no-filename no-heading no-ignore no-ignore-dot no-ignore-exclude ' +
    'no-ignore-files no-ignore-global no-ignore-messages no-ignore-parent no-ignore-vcs no-line-number ' +
    'no-messages no-mmap no-pcre2-unicode no-require-git no-unicode null null-data one-file-system ' +
    'only-matching passthru path-separator= pcre2 pcre2-version pre= pre-glob= pretty quiet regex-size-limit= ' +
    'regexp= replace= search-zip smart-case sort= sortr= stats text threads= trim type= type-add= type-clear= ' +
    'type-list type-not= unrestricted version vimgrep with-filename word-regexp hostname-bin= hyperlink-format= ' +
    'no-context-separator no-hidden no-follow no-binary no-text no-crlf no-search-zip no-unrestricted help',
  {
    deny: {
      '--pre': 'runs a program on every file',
      '--pre-glob': 'belongs to --pre, which runs a program',
      '--hostname-bin': 'runs a program',
      '-z': 'runs decompression programs',
      '--search-zip': 'runs decompression programs',
    },
  },
);

/** `hostname NAME`, `-F FILE`, `-b` set the host name; only the reporting options are known here. */
const HOSTNAME = t(
  'aAdfiIsy',
  'alias all-fqdns domain fqdn long ip-address all-ip-addresses short yp nis help version',
);

const SED = t(
  'ne:f:Ei::l:rsuzb',
  'quiet silent expression= file= regexp-extended in-place? line-length= null-data zero-terminated separate ' +
    'unbuffered posix debug sandbox follow-symlinks binary help version',
  {
    deny: {
      '-i': 'edits files in place',
      '--in-place': 'edits files in place',
      '-f': 'reads a script this check cannot see',
      '--file': 'reads a script this check cannot see',
    },
  },
);

/** awk: only `-F` and `-v` are allowed; `-f` reads unseen code, gawk's `-i`/`-l`/`-o`/`-p`/`-d` load or write. */
const AWK = t('F:v:', '');

const XARGS = t(
  '0a:d:E:e::I:i::L:l::n:P:rs:tx',
  'null arg-file= delimiter= eof? replace? max-lines? max-args= max-procs= no-run-if-empty max-chars= ' +
    'show-limits verbose exit',
);
const TIMEOUT = t('k:s:v', 'preserve-status foreground kill-after= signal= verbose');
const NICE = t('n:', 'adjustment=', { digits: true });

const PROGRAMS: Record<string, Check> = {
  ...Object.fromEntries(Object.entries(TABLES).map(([name, table]) => [name, withOptions(table)])),
  egrep: withOptions(TABLES.grep),
  fgrep: withOptions(TABLES.grep),
  md5sum: withOptions(TABLES.sum),
  sha1sum: withOptions(TABLES.sum),
  sha224sum: withOptions(TABLES.sum),
  sha256sum: withOptions(TABLES.sum),
  sha384sum: withOptions(TABLES.sum),
  sha512sum: withOptions(TABLES.sum),
  pushd: allArgsAreWords,
  popd: allArgsAreWords,
  dirs: allArgsAreWords,
  // These cannot write a file or run a program, whatever their arguments.
  echo: allArgsAreWords,
  true: allArgsAreWords,
  false: allArgsAreWords,
  sleep: allArgsAreWords,
  expr: allArgsAreWords,
  jq: allArgsAreWords,
  cal: allArgsAreWords,
  locale: allArgsAreWords,
  ps: allArgsAreWords,
  sort: withOptions(SORT),
  uniq: withOptions(UNIQ, atMostOperands(1)),
  date: withOptions(DATE, (ops) => {
    if (!ops.every((o) => o.exact && o.text.startsWith('+')) || ops.length > 1)
      deny('an operand other than +FORMAT sets the clock');
  }),
  tree: withOptions(TREE),
  file: withOptions(FILE),
  rg: withOptions(RG),
  hostname: withOptions(HOSTNAME, noOperands),
  env: (args) => {
    if (args.length > 0) deny('env runs a program or changes the environment');
  },
  printf: (args) => {
    const first = args[0];
    // `printf -v NAME` assigns a variable (and evaluates an array subscript in NAME).
    if (first && (!first.dashSafe || (first.text.startsWith('-') && first.text !== '--')))
      deny('printf with an option (-v assigns a variable)');
  },
  test: testCheck,
  command: (args) => {
    const parsed = parseOptions(t('vVp', ''), args);
    if (!parsed.options.some((o) => o.def.name === 'v' || o.def.name === 'V'))
      deny('`command NAME` runs NAME (only `command -v` / `-V` look a name up)');
  },
  find: findCheck,
  sed: sedCheck,
  awk: awkCheck,
  gawk: awkCheck,
  mawk: awkCheck,
  nawk: awkCheck,
  git: gitCheck,
  time: (args, ctx) => checkWords(args[0]?.text === '-p' ? args.slice(1) : args, ctx),
  nice: (args, ctx) => {
    const parsed = parseOptions(NICE, args, { stopAtOperand: true });
    checkWords(parsed.operands, ctx);
  },
  timeout: (args, ctx) => {
    const parsed = parseOptions(TIMEOUT, args, { stopAtOperand: true });
    checkWords(parsed.operands.slice(1), ctx);
  },
  xargs: xargsCheck,
};

/** Programs whose every argument may come from elsewhere (xargs' standard input) without risk. */
function acceptsAnyArguments(name: string): boolean {
  if (name in TABLES) return TABLES[name as keyof typeof TABLES].allSafe && name !== 'cd';
  return ['echo', 'true', 'false', 'expr', 'jq', 'egrep', 'fgrep'].includes(name) || /sum$/.test(name);
}

/** bash's `test` evaluates the array subscript of `-v NAME` / `-R NAME`, which can run commands. */
function testCheck(args: Arg[]): void {
  for (const a of args) {
    if (!a.dashSafe && !a.exact) deny('test with a pattern that may expand to an operator');
    if (a.text === '-v' || a.text === '-R')
      deny('test -v / -R evaluates a variable name (and its subscript)');
  }
}

// ---------------------------------------------------------------- find

const FIND_WRITERS: Record<string, string> = {
  '-delete': 'deletes files',
  '-exec': 'runs a program',
  '-execdir': 'runs a program',
  '-ok': 'runs a program',
  '-okdir': 'runs a program',
  '-fprint': 'writes a file',
  '-fprint0': 'writes a file',
  '-fprintf': 'writes a file',
  '-fls': 'writes a file',
};
const FIND_NO_ARG = new Set(
  words(
    '-print -print0 -ls -prune -quit -true -false -empty -executable -readable -writable -nogroup -nouser ' +
      '-depth -d -mount -xdev -noleaf -ignore_readdir_race -noignore_readdir_race -daystart -follow -warn ' +
      '-nowarn -help -version -not -and -a -or -o ( ) ! ,',
  ),
);
const FIND_ONE_ARG = new Set(
  words(
    '-printf -maxdepth -mindepth -regextype -amin -anewer -atime -cmin -cnewer -ctime -fstype -gid -group ' +
      '-ilname -iname -inum -ipath -iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm ' +
      '-regex -samefile -size -type -uid -used -user -wholename -xtype -context -files0-from',
  ),
);

function findCheck(args: Arg[]): void {
  let k = 0;
  // Leading options: -H -L -P, -D debugopts, -Olevel.
  while (k < args.length) {
    const a = args[k]!;
    if (!a.exact) break;
    if (['-H', '-L', '-P'].includes(a.text) || /^-O\d?$/.test(a.text)) k++;
    else if (a.text === '-D') k += 2;
    else break;
  }
  // Starting points: up to the first word that begins an expression.
  while (k < args.length) {
    const a = args[k]!;
    if (!a.exact && !a.dashSafe) deny('a pattern that may expand to a find expression');
    if (a.exact && (a.text.startsWith('-') || ['(', ')', '!', ','].includes(a.text))) break;
    k++;
  }
  for (; k < args.length; k++) {
    const a = args[k]!;
    if (!a.exact) deny(`\`${a.text}\` in a find expression may expand to anything`);
    const p = a.text;
    if (FIND_WRITERS[p]) deny(`find ${p} ${FIND_WRITERS[p]}`);
    if (FIND_NO_ARG.has(p)) continue;
    if (FIND_ONE_ARG.has(p) || /^-newer[aBcmt][aBcmt]$/.test(p)) {
      const v = args[++k];
      if (!v) deny(`find ${p} needs a value`);
      if (v!.multi) deny(`the value of find ${p} may expand to several words`);
      continue;
    }
    deny(`find ${p} is not a known read-only find primary`);
  }
}

// ---------------------------------------------------------------- sed

function sedCheck(args: Arg[]): void {
  if (args.some((a) => !a.exact && !a.dashSafe)) deny('a pattern that may expand to a sed option');
  const parsed = parseOptions(SED, args);
  const scripts = parsed.options.filter((o) => o.def.name === 'e' || o.def.name === 'expression');
  const operands = [...parsed.operands];
  const texts = scripts.map((o) => o.value!);
  if (texts.length === 0) {
    const script = operands.shift();
    if (!script) deny('sed without a script');
    texts.push(script!);
  }
  for (const s of texts) {
    if (!s.exact) deny('a sed script with a pattern in it');
    const why = explainSedScript(s.text);
    if (why !== undefined) deny(`sed script: ${why}`);
  }
}

/** sed scripts: allow only commands that print or transform the stream; `w`, `W`, `e`, `s///w|e` write or run. */
export function isReadOnlySedScript(script: string): boolean {
  return explainSedScript(script) === undefined;
}

/**
 * A strict subset of GNU sed's grammar: addresses, `{ }`, `!`, the stream commands `p P d D n N g G h H x l
 * = z F q Q`, `a`/`i`/`c` text, `s` with flags `g p i I m M N` and `y`. Branches and labels (`b t T :`),
 * whose label syntax differs between sed implementations, are refused, as are `e`, `r`, `R`, `w`, `W`, `v`.
 */
function explainSedScript(script: string): string | undefined {
  let i = 0;
  const n = script.length;
  const readDelimited = (delim: string): boolean => {
    while (i < n) {
      const ch = script[i]!;
      if (ch === '\\') {
        if (script[i + 1] === undefined) return false;
        i += 2;
        continue;
      }
      if (ch === '\n') return false;
      if (ch === delim) {
        i++;
        return true;
      }
      i++;
    }
    return false;
  };
  const readAddress = (): boolean => {
    const ch = script[i];
    if (ch === undefined) return true;
    if (/\d/.test(ch)) {
      while (i < n && /\d/.test(script[i]!)) i++;
      if (script[i] === '~') {
        i++;
        while (i < n && /\d/.test(script[i]!)) i++;
      }
      return true;
    }
    if (ch === '$') {
      i++;
      return true;
    }
    if (ch === '/' || ch === '\\') {
      let delim = '/';
      if (ch === '\\') {
        delim = script[i + 1] ?? '';
        if (delim === '' || delim === '\n' || delim === '\\') return false;
        i++;
      }
      i++;
      if (!readDelimited(delim)) return false;
      while (i < n && /[IM]/.test(script[i]!)) i++;
      return true;
    }
    return true;
  };
  const blanks = () => {
    while (i < n && (script[i] === ' ' || script[i] === '\t')) i++;
  };
  for (;;) {
    while (i < n && /[\s;]/.test(script[i]!)) i++;
    if (i >= n) return undefined;
    if (script[i] === '}') {
      i++;
      continue;
    }
    if (script[i] === '#') {
      while (i < n && script[i] !== '\n') i++;
      continue;
    }
    if (!readAddress()) return 'malformed address';
    blanks();
    if (script[i] === ',') {
      i++;
      blanks();
      if (script[i] === '+' || script[i] === '~') {
        i++;
        if (!/\d/.test(script[i] ?? '')) return 'malformed address';
      }
      if (!readAddress()) return 'malformed address';
    }
    blanks();
    while (script[i] === '!') {
      i++;
      blanks();
    }
    const cmd = script[i];
    if (cmd === undefined) return 'an address without a command';
    i++;
    switch (cmd) {
      case '{':
        continue;
      case 'p':
      case 'P':
      case 'd':
      case 'D':
      case 'n':
      case 'N':
      case 'g':
      case 'G':
      case 'h':
      case 'H':
      case 'x':
      case '=':
      case 'z':
      case 'F':
        break;
      case 'l':
      case 'q':
      case 'Q':
        blanks();
        while (i < n && /\d/.test(script[i]!)) i++;
        break;
      case 'a':
      case 'i':
      case 'c':
        // Text up to the end of the line is only printed.
        while (i < n && script[i] !== '\n') i++;
        continue;
      case 'y':
      case 's': {
        const delim = script[i];
        if (delim === undefined || delim === '\\' || delim === '\n' || delim === ' ')
          return `malformed ${cmd}`;
        i++;
        if (!readDelimited(delim) || !readDelimited(delim)) return `malformed ${cmd}`;
        if (cmd === 's') {
          while (i < n && /[gpiImM0-9]/.test(script[i]!)) i++;
          if (script[i] === 'w' || script[i] === 'W') return 'the w flag writes a file';
          if (script[i] === 'e') return 'the e flag runs the pattern space as a command';
        }
        break;
      }
      case 'b':
      case 't':
      case 'T':
      case ':':
        return 'branches and labels are not analysed';
      case 'w':
      case 'W':
        return `${cmd} writes a file`;
      case 'e':
        return 'e runs a command';
      case 'r':
      case 'R':
        return `${cmd} reads a file this check does not see`;
      default:
        return `unknown sed command ${JSON.stringify(cmd)}`;
    }
    blanks();
    const next = script[i];
    if (next !== undefined && !';\n}#'.includes(next))
      return `unexpected ${JSON.stringify(next)} after ${cmd}`;
  }
}

// ---------------------------------------------------------------- awk

/**
 * awk programs: anything that could write or run is refused by its spelling — output redirection and pipes
 * (`>`, `|`, including comparisons written with `>`), `system`, `getline`, `close`, `fflush`, and gawk's `@`
 * (`@include`, `@load`, `@namespace`, indirect calls such as `@f()` with `f = "system"`).
 */
function awkCheck(args: Arg[]): void {
  if (args.some((a) => !a.exact && !a.dashSafe)) deny('a pattern that may expand to an awk option');
  const parsed = parseOptions(AWK, args, { stopAtOperand: true });
  const program = parsed.operands[0];
  if (!program) deny('awk without a program text');
  if (!program!.exact) deny('an awk program with a pattern in it');
  const text = program!.text;
  const bad = /[>|@]|\\\n|\b(system|getline|close|fflush)\b/.exec(text);
  if (bad) deny(`awk program uses ${JSON.stringify(bad[0])}`);
}

// ---------------------------------------------------------------- xargs

function xargsCheck(args: Arg[], ctx: Context): void {
  const parsed = parseOptions(XARGS, args, { stopAtOperand: true });
  const command = parsed.operands;
  if (command.length === 0) return; // defaults to echo
  const first = command[0]!;
  const name = first.exact ? programName(first.text) : undefined;
  // Arguments appended from stdin are unknown: only programs safe with ANY arguments qualify.
  if (name === undefined || !acceptsAnyArguments(name))
    deny(`xargs ${first.text}: arguments from standard input could make it write or execute`);
  checkWords(command, ctx);
}

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

function gitCheck(args: Arg[]): void {
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
  check!(args.slice(k + 1), { depth: 0 });
}

// ---------------------------------------------------------------- commands

const SYSTEM_BIN = /^\/(usr\/(local\/)?)?s?bin\//;

function programName(text: string): string | undefined {
  if (SYSTEM_BIN.test(text)) return text.replace(SYSTEM_BIN, '');
  if (text.includes('/')) return undefined; // ./script or a relative path: could be anything
  return text;
}

const WRAPPERS = new Set(['time', 'nice', 'timeout', 'xargs']);

function checkWords(cmdWords: Arg[], ctx: Context): void {
  if (ctx.depth > 4) deny('too many nested wrappers');
  const first = cmdWords[0];
  if (!first) {
    if (ctx.depth === 0) deny('empty command');
    return;
  }
  if (!first.exact) deny('the program name is not a plain, known command');
  const name = programName(first.text);
  if (name === undefined) deny('the program name is not a plain, known command');
  const check = Object.hasOwn(PROGRAMS, name!) ? PROGRAMS[name!] : undefined;
  if (!check) deny(`\`${name}\` is not a known read-only command`);
  try {
    check!(cmdWords.slice(1), { depth: WRAPPERS.has(name!) ? ctx.depth + 1 : ctx.depth });
  } catch (e) {
    if (e instanceof OptionRefusal)
      deny(`\`${name}\` is used with arguments that may write or execute (${e.message})`);
    if (e instanceof NotReadOnly && !e.message.startsWith('`'))
      deny(`\`${name}\` is used with arguments that may write or execute (${e.message})`);
    throw e;
  }
}

function checkCommand(cmd: SimpleCommand): void {
  for (const a of cmd.assignments) {
    if (!SAFE_ASSIGNMENTS.test(a.name)) deny(`sets environment variable ${a.name}`);
    if (!a.value.exact) deny(`sets environment variable ${a.name} to an expansion`);
  }
  checkWords(cmd.words, { depth: 0 });
}

const DIRECTORY_CHANGERS = new Set(['cd', 'pushd', 'popd']);

/** Why a command is not read-only, or undefined when it is. Useful in denial messages and tests. */
export function explainBashCommand(command: string): string | undefined {
  if (command.trim().length === 0) return 'empty command';
  let line: ReturnType<typeof parseBashLine>;
  try {
    line = parseBashLine(command);
  } catch (e) {
    if (e instanceof Unanalysable) return `cannot be analysed: ${e.message}`;
    throw e;
  }
  if (line.commands.length === 0) return 'empty command';
  try {
    for (const r of line.redirects) checkRedirect(r);
    for (const c of line.commands) checkCommand(c);
    const names = line.commands.map((c) => (c.words[0]?.exact ? programName(c.words[0].text) : undefined));
    if (names.includes('git') && names.some((n) => n !== undefined && DIRECTORY_CHANGERS.has(n)))
      deny('git after a directory change may run another repository’s configuration');
  } catch (e) {
    if (e instanceof NotReadOnly) return e.message;
    if (e instanceof OptionRefusal) return e.message;
    throw e;
  }
  return undefined;
}

export function isReadOnlyBashCommand(command: string): boolean {
  return explainBashCommand(command) === undefined;
}

/** The commands a read-only Bash policy accepts, for denial messages the model can act on. */
export const READ_ONLY_COMMAND_HINT =
  'ls, find (without -exec/-delete), grep, rg, cat, head, tail, wc, stat, du, sort, uniq, cut, sed -n, jq, ' +
  'git status/log/diff/show';
