// `[[links]]` between memories (the contract shared by recall and the compatibility layer): a memory may
// point at another with `[[slug]]` or `[[slug|shown text]]`. Links inside fenced code blocks (``` or ~~~)
// and inline code spans are text, not links.

const FENCE = /^[ \t]{0,3}(`{3,}|~{3,})/;
const LINK = /\[\[([^[\]\n|]+)(?:\|[^[\]\n]*)?\]\]/g;

/** Inline code spans of one line replaced by spaces (same length), per CommonMark's backtick-run rule. */
function blankCodeSpans(line: string): string {
  let out = '';
  let i = 0;
  while (i < line.length) {
    if (line[i] !== '`') {
      out += line[i];
      i += 1;
      continue;
    }
    let run = 0;
    while (line[i + run] === '`') run += 1;
    const ticks = '`'.repeat(run);
    let close = line.indexOf(ticks, i + run);
    // The closing run must be exactly as long as the opening one.
    while (close !== -1 && line[close + run] === '`') {
      let longer = run;
      while (line[close + longer] === '`') longer += 1;
      close = line.indexOf(ticks, close + longer);
    }
    if (close === -1) {
      out += ticks;
      i += run;
      continue;
    }
    out += ' '.repeat(close + run - i);
    i = close + run;
  }
  return out;
}

/**
 * The distinct slugs of `[[slug]]` links (`[[slug|alias]]` gives `slug`) in order of first appearance,
 * trimmed, ignoring links inside fenced code blocks and inline code spans.
 */
export function parseMemoryLinks(markdown: string): string[] {
  if (!markdown.includes('[[')) return [];
  const seen = new Set<string>();
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of markdown.split(/\r?\n/)) {
    const opener = FENCE.exec(line);
    if (fence !== undefined) {
      if (opener && opener[1]?.[0] === fence[0] && (opener[1]?.length ?? 0) >= fence.length)
        fence = undefined;
      continue;
    }
    if (opener) {
      fence = opener[1];
      continue;
    }
    if (!line.includes('[[')) continue;
    for (const match of blankCodeSpans(line).matchAll(LINK)) {
      const slug = (match[1] ?? '').trim();
      if (slug === '' || seen.has(slug)) continue;
      seen.add(slug);
      out.push(slug);
    }
  }
  return out;
}
