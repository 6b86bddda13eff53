// Per-program option tables and checks of the read-only classifier (bash-readonly.ts walks the line): which
// programs only read, and which of their options and operands keep it so. Tables follow GNU coreutils,
// findutils, grep, sed, util-linux and ripgrep; git's are in bash-git.ts.

import {
  allArgsAreWords,
  atMostOperands,
  type Check,
  type Context,
  deny,
  noOperands,
  programName,
  withOptions,
  words,
} from './bash-check.js';
import { gitCheck } from './bash-git.js';
import { type OptionTable, parseOptions, optionTable as t } from './bash-options.js';
import type { Arg } from './bash-parse.js';

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

export const PROGRAMS: Record<string, Check> = {
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
  time: (args, ctx) => ctx.checkWords(args[0]?.text === '-p' ? args.slice(1) : args, ctx),
  nice: (args, ctx) => {
    const parsed = parseOptions(NICE, args, { stopAtOperand: true });
    ctx.checkWords(parsed.operands, ctx);
  },
  timeout: (args, ctx) => {
    const parsed = parseOptions(TIMEOUT, args, { stopAtOperand: true });
    ctx.checkWords(parsed.operands.slice(1), ctx);
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
  ctx.checkWords(command, ctx);
}
