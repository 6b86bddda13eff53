import { describe, expect, it } from 'vitest';
import { isReadOnlySedScript } from './bash-programs.js';
import { explainBashCommand, isReadOnlyBashCommand } from './bash-readonly.js';

// Commands that write, delete, redirect into files, execute arbitrary code or escape the parser.
// None of them may ever be classified read-only.
const WRITING = [
  'rm -rf build',
  'rm file.txt',
  'rmdir old',
  'mv a b',
  'cp a b',
  'mkdir -p x/y',
  'touch new.md',
  'chmod 777 file',
  'chown root file',
  'ln -s a b',
  'dd if=/dev/zero of=disk.img bs=1M count=1',
  'truncate -s 0 file',
  'shred file',
  'install -m 644 a b',
  'echo hi > out.txt',
  'echo hi >> out.txt',
  'echo hi >| out.txt',
  'ls &> listing.txt',
  'ls &>> listing.txt',
  'ls 2> errors.log',
  'ls >& all.log',
  'cat < in.txt > out.txt',
  'true <> file',
  'cat <<EOF\nhello\nEOF',
  'ls | tee out.txt',
  'ls | tee /dev/null',
  'find . -name "*.tmp" -delete',
  'find . -exec rm {} \\;',
  'find . -execdir rm {} +',
  'find . -ok rm {} \\;',
  'find . -fprint out.txt',
  'find . -fprintf out.txt %p',
  'find . -fls out.txt',
  'find . $ACTION',
  'sed -i "s/a/b/" file.txt',
  'sed -i.bak s/a/b/ file.txt',
  'sed -ni p file.txt',
  'sed --in-place s/a/b/ file.txt',
  'sed "s/a/b/w out.txt" file.txt',
  'sed -e "w out.txt" file.txt',
  'sed "1e rm -rf /" file.txt',
  'sed -f script.sed file.txt',
  'sort -o sorted.txt in.txt',
  'sort --output=sorted.txt in.txt',
  'sort -ro sorted.txt in.txt',
  'sort --compress-program=sh in.txt',
  'uniq in.txt out.txt',
  'awk \'{ print > "out.txt" }\' in.txt',
  'awk \'BEGIN { system("rm -rf /") }\'',
  'awk -f prog.awk in.txt',
  "awk -i inplace '{print}' file",
  'git commit -m "msg"',
  'git push origin main',
  'git reset --hard HEAD~1',
  'git checkout -- .',
  'git clean -fdx',
  'git add .',
  'git stash',
  'git branch -D feature',
  'git branch new-feature',
  'git tag v1.0',
  'git tag -d v1.0',
  'git config user.name Someone',
  'git remote add origin url',
  'git -c core.pager="rm -rf x" log',
  'git diff --output=patch.diff',
  'git log -p --output patch.txt',
  'git grep -O foo',
  'git reflog expire --all',
  'git rebase main',
  'git merge feature',
  'git cherry-pick abc',
  'git fetch',
  'git pull',
  'ls; rm -rf x',
  'ls && rm -rf x',
  'ls || rm -rf x',
  'ls\nrm -rf x',
  '(cd sub && rm -rf x)',
  'ls | xargs rm',
  'find . | xargs -0 rm -f',
  'ls | xargs sed -n p',
  'ls | xargs -I{} cp {} backup/',
  'echo $(rm -rf x)',
  'echo "$(rm -rf x)"',
  'echo `rm -rf x`',
  'cat <(rm x)',
  'diff <(ls) >(tee out)',
  'FOO=bar ls',
  'PATH=/tmp/evil:$PATH ls',
  'LD_PRELOAD=/tmp/evil.so cat file',
  'GIT_EXTERNAL_DIFF=rm git diff',
  'X=1',
  'eval "rm -rf x"',
  'exec rm x',
  'source ./script.sh',
  '. ./script.sh',
  'bash -c "rm x"',
  'sh script.sh',
  "python -c \"open('x','w')\"",
  "node -e \"require('fs').writeFileSync('x','')\"",
  'perl -pi -e s/a/b/ file',
  'npm install',
  'make',
  'curl -o out.html http://example.com',
  'wget http://example.com',
  'tar xf archive.tar',
  'unzip archive.zip',
  'rsync -a a/ b/',
  'kill -9 1234',
  'sudo ls',
  'env rm x',
  'command rm x',
  'nice rm x',
  'timeout 5 rm x',
  'time rm x',
  'nohup ls',
  './script.sh',
  'bin/tool --write',
  '$CMD arg',
  'date -s "2020-01-01"',
  'date 010100002020',
  'hostname evil',
  'tree -o out.txt',
  'file -C -m magic',
  'rg --pre ./run.sh foo',
  'base64 -o out.txt in.txt',
  'ls &',
  'for f in *; do rm $f; done',
  'if true; then rm x; fi',
  'f() { rm x; }; f',
  '{ rm x; }',
  'echo "unterminated',
  "echo 'unterminated",
  'while true; do touch x; done',
  'case x in x) rm y;; esac',
  'mkfifo pipe',
  'split -l 10 file',
  'patch -p1 < fix.diff',
  'crontab -r',
  'yes > file',
  'cat x >/dev/null\rfoo',
  'rm\r -rf x',
];

// Commands that only read.
const READ_ONLY = [
  'ls',
  'ls -la',
  'ls -la ~/projects',
  'pwd',
  'cat README.md',
  'cat file | grep foo | wc -l',
  'head -n 20 file.txt',
  'tail -n 50 log.txt',
  'wc -l *.md',
  'grep -rn "TODO" src',
  'grep -r ">" src',
  'find . -name "*.md" -type f',
  'find . -maxdepth 2 -newer package.json',
  'find . -name "*.md" | xargs grep -l memory',
  'find . -print0 | xargs -0 wc -l',
  'stat file.txt',
  'du -sh .',
  'df -h',
  'sort file.txt | uniq -c | sort -rn',
  'sort -k2 -t, data.csv',
  'cut -d: -f1 /etc/passwd',
  'sed -n "1,20p" file.txt',
  "sed 's/foo/bar/g' file.txt",
  'sed -E "s/(a|b)+/x/" file.txt',
  "sed -n '/start/,/end/p' file.txt",
  "awk '{print $1}' file.txt",
  "awk -F: '{ print $1 }' /etc/passwd",
  'jq .name package.json',
  'git status',
  'git status --porcelain',
  'git log --oneline -n 10',
  'git log --oneline | head -5',
  'git diff HEAD~1 -- src',
  'git show HEAD:README.md',
  'git branch',
  'git branch -a --contains HEAD',
  'git tag -l "v*"',
  'git remote -v',
  'git rev-parse --show-toplevel',
  'git ls-files',
  'git blame README.md',
  'git --no-pager log',
  'git config --get user.name',
  'git stash list',
  'git worktree list',
  'echo hello',
  'echo "HOME is where the heart is"',
  'ls > /dev/null 2>&1',
  'ls 2>/dev/null',
  'grep foo file >&2',
  'cat < input.txt',
  'grep x <<< "a x b"',
  '(cd src && ls)',
  'cd src && ls -la',
  'LC_ALL=C sort file.txt',
  'which node',
  'command -v git',
  'date +%Y-%m-%d',
  'uname -a',
  'basename /a/b/c.txt',
  'realpath .',
  'readlink -f link',
  'diff a.txt b.txt',
  'wc -c < file.txt',
  'tree -L 2',
  'rg -n "pattern" src',
  '/usr/bin/cat file',
  'time ls',
  'timeout 5 grep -r foo .',
  '! grep -q foo file',
  'ls # rm -rf x is only a comment',
  'test -f file && cat file',
  'printenv HOME',
  'md5sum file',
  'nl file.txt | head',
];

describe('isReadOnlyBashCommand', () => {
  it('covers at least 100 commands, at least 60 of which write', () => {
    expect(WRITING.length + READ_ONLY.length).toBeGreaterThanOrEqual(100);
    expect(WRITING.length).toBeGreaterThanOrEqual(60);
  });

  it.each(WRITING)('classifies a writing or escaping command as not read-only: %s', (command) => {
    expect(isReadOnlyBashCommand(command)).toBe(false);
  });

  it.each(READ_ONLY)('classifies a read-only command as read-only: %s', (command) => {
    expect(explainBashCommand(command)).toBeUndefined();
  });

  it('stays not read-only when a writing command is chained behind read-only ones', () => {
    const templates = [
      (w: string) => `ls; ${w}`,
      (w: string) => `cat f | grep x && ${w}`,
      (w: string) => `git status || ${w}`,
      (w: string) => `(cd src && ${w})`,
      (w: string) => `ls | head -1\n${w}`,
      (w: string) => `LC_ALL=C ${w}`,
    ];
    const composed = WRITING.filter((w) => !w.includes('unterminated')).flatMap((w) =>
      templates.map((t) => t(w)),
    );
    expect(composed.filter((c) => isReadOnlyBashCommand(c))).toEqual([]);
  });

  it('explains why a command is refused', () => {
    expect(explainBashCommand('echo hi > out.txt')).toBe('writes through a redirection');
    expect(explainBashCommand('rm x')).toBe('`rm` is not a known read-only command');
    expect(explainBashCommand('sed -i s/a/b/ f')).toMatch(
      /^`sed` is used with arguments that may write or execute \(-i: edits files in place\)$/,
    );
    expect(explainBashCommand('echo $(ls)')).toMatch(/^cannot be analysed: command substitution/);
    // Stricter than the hand-written lexer on purpose: no expansion of any kind is analysed, and git may not
    // be pointed at another repository.
    expect(explainBashCommand('echo "$HOME"')).toMatch(/^cannot be analysed/);
    expect(explainBashCommand('git -C /repo --no-pager log')).toMatch(/-C runs in another directory/);
    expect(explainBashCommand('   ')).toBe('empty command');
  });

  it('treats quoted metacharacters as text, not as operators', () => {
    expect(isReadOnlyBashCommand('grep "a > b; rm x" file')).toBe(true);
    expect(isReadOnlyBashCommand("echo '$(rm x)' '`rm x`'")).toBe(true);
    expect(isReadOnlyBashCommand('echo a\\;rm')).toBe(true);
  });
});

describe('isReadOnlySedScript', () => {
  it.each([
    ['p', true],
    ['1,10p', true],
    ['/a/,/b/d', true],
    ['s/x/y/gi', true],
    ['s|a/b|c|', true],
    ['y/abc/xyz/', true],
    ['$!N;P;D', true],
    ['w out', false],
    ['s/a/b/w out', false],
    ['s/a/b/e', false],
    ['e ls', false],
    ['r /etc/passwd', false],
    ['1W out', false],
  ])('%s → %s', (script, expected) => {
    expect(isReadOnlySedScript(script)).toBe(expected);
  });
});
