import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/**
 * The fenced code blocks of README.md and docs/, as the docs tests run them (CONTRIBUTING.md).
 * Every fence names its language, so that nothing escapes the tests by being untagged:
 * `ts`/`js` run through the SDK, `sh`/`bash` through bash, `text`/`json` are output and are not run.
 * A runnable block that cannot run against `troupe up` on one small machine says so on the last
 * non-blank line before its fence: `<!-- docs-test: skip (the reason) -->`.
 */

/** The repository root, from dist/test/helpers/. */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

export type BlockKind = 'ts' | 'js' | 'sh';

export interface DocBlock {
  /** Relative to the repository root, e.g. docs/graphs.md. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  kind: BlockKind;
  code: string;
  /** The marker's reason, when the block is not run. */
  skip?: string;
}

export interface DocBlocks {
  blocks: DocBlock[];
  /** Fences the tests cannot classify and misplaced or malformed markers, each naming file:line. */
  problems: string[];
}

const RUN: Record<string, BlockKind> = { ts: 'ts', typescript: 'ts', js: 'js', javascript: 'js', sh: 'sh', bash: 'sh' };
const OUTPUT = new Set(['text', 'json']);
const FENCE = /^( *)(`{3,}|~{3,})\s*(\S*)/;
const MARKER = /^\s*<!--\s*docs-test:(.*?)-->\s*$/;
const SKIP = /^\s*skip\s+\((.+)\)\s*$/;

/** Splits one markdown page into its runnable blocks; `file` names it in blocks and problems. */
export function docBlocks(file: string, markdown: string): DocBlocks {
  const lines = markdown.split('\n');
  const blocks: DocBlock[] = [];
  const problems: string[] = [];
  let lastText = -1; // index of the last non-blank line outside a block
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) {
      if (lines[i]!.trim() !== '') lastText = i;
      continue;
    }
    const [, indent = '', fence = '', lang = ''] = open;
    const body: string[] = [];
    let end = i + 1;
    // A closing fence is the same character, at least as long, and nothing after it.
    const close = new RegExp(`^ *${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
    for (; end < lines.length && !close.test(lines[end]!); end++)
      body.push(lines[end]!.startsWith(indent) ? lines[end]!.slice(indent.length) : lines[end]!.trimStart());
    const where = `${file}:${i + 1}`;
    if (end >= lines.length) problems.push(`${where}: a fence that is never closed`);
    const marker = lastText >= 0 ? MARKER.exec(lines[lastText]!) : null;
    const skip = marker ? SKIP.exec(marker[1]!)?.[1] : undefined;
    if (marker && skip === undefined)
      problems.push(`${where}: the marker '${lines[lastText]!.trim()}' is not '<!-- docs-test: skip (reason) -->'`);
    const kind = RUN[lang.toLowerCase()];
    if (kind) blocks.push({ file, line: i + 1, lang, kind, code: body.join('\n'), ...(skip !== undefined && { skip }) });
    else if (!OUTPUT.has(lang.toLowerCase()))
      problems.push(
        `${where}: ${lang ? `language '${lang}'` : 'no language'}: tag it ts, js, sh or bash to run it, text or json for output`,
      );
    else if (marker) problems.push(`${where}: a docs-test marker on a '${lang}' block, which is never run`);
    i = end;
    lastText = -1;
  }
  return { blocks, problems };
}

/** README.md's blocks, read from the repository. */
export async function readmeBlocks(): Promise<DocBlocks> {
  return docBlocks('README.md', await readFile(`${REPO}README.md`, 'utf8'));
}

/**
 * The pages of docs/ in the order README.md's table lists them (a reader's order), then any page
 * it does not link, by name.
 */
export async function docPages(): Promise<string[]> {
  const readme = await readFile(`${REPO}README.md`, 'utf8');
  const linked = [...readme.matchAll(/\]\((docs\/[\w.-]+\.md)\)/g)].map((m) => m[1]!);
  const all = (await readdir(`${REPO}docs`)).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
  const ordered = [...new Set(linked)].filter((page) => all.includes(page));
  return [...ordered, ...all.filter((page) => !ordered.includes(page)).sort()];
}

/** Every page's blocks and problems, pages in `docPages` order. */
export async function pagesBlocks(): Promise<DocBlocks> {
  const out: DocBlocks = { blocks: [], problems: [] };
  for (const page of await docPages()) {
    const one = docBlocks(page, await readFile(`${REPO}${page}`, 'utf8'));
    out.blocks.push(...one.blocks);
    out.problems.push(...one.problems);
  }
  return out;
}
