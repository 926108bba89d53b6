import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { test } from 'node:test';

// The quoting convention (docs/performance.md#how-figures-are-quoted): a block of a page between
// `<!-- figures from bench/RESULTS-x.md bench/RESULTS-y.md -->` and `<!-- end of figures -->` quotes
// figures, and every number in it is one that a file it names holds; every date in it (YYYY-MM-DD)
// is one of those files' dates. Exempt: targets (a number after ≤ or ≥), times of day, what is in
// `code` (commands, flags) and link targets. Each results file has one generator, which writes all
// of it: a figure no file holds was measured nowhere that can be run again.

const ROOT = new URL('../../../', import.meta.url);
const BLOCK = /<!-- figures from ([^>]*?) -->([\s\S]*?)<!-- end of figures -->/g;

/** The numbers written in `text`, thousands separators dropped (26,564 is 26564). */
function numbersIn(text: string): Set<string> {
  const plain = text
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/\]\([^)]*\)/g, ']')
    .replace(/`[^`]*`/g, ' ')
    .replace(/\d{4}-\d{2}-\d{2}(T[\d:.]+Z?)?/g, ' ')
    .replace(/\b\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\b/g, ' ')
    .replace(/[≤≥]\s*[\d.,]+/g, ' ');
  const out = new Set<string>();
  for (const m of plain.matchAll(/(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.,])\d+(?:\.\d+)?/g))
    out.add(m[0].replace(/,/g, ''));
  return out;
}

const datesIn = (text: string) => new Set(text.match(/\d{4}-\d{2}-\d{2}/g) ?? []);

async function pages(): Promise<{ name: string; text: string }[]> {
  const docs = (await readdir(new URL('docs/', ROOT))).filter((f) => f.endsWith('.md'));
  const files = [...docs.map((f) => `docs/${f}`), 'README.md'];
  return Promise.all(files.map(async (name) => ({ name, text: await readFile(new URL(name, ROOT), 'utf8') })));
}

test('numbersIn reads figures as written: separators, decimals, ratios; skips targets, code, dates and times', () => {
  const found = numbersIn('26,564 req/s (0.82x) at 64 in flight, ≥ 1.3x, `--http-workers 7`, 2026-11-26 10:12, [a](x.md#a-3)');
  assert.deepEqual([...found].sort(), ['0.82', '26564', '64']);
});

test('every figure docs/ quotes in a figures block is in a results file the block names, with its date', async () => {
  let blocks = 0;
  for (const page of await pages()) {
    for (const [, names, body] of page.text.matchAll(BLOCK)) {
      blocks++;
      const files = names!.split(/[\s,]+/).filter(Boolean);
      assert.ok(files.length > 0, `${page.name}: a figures block names no results file`);
      const held = new Set<string>();
      const dates = new Set<string>();
      for (const file of files) {
        assert.match(file, /^bench\/RESULTS[\w-]*\.md$/, `${page.name}: '${file}' is not a results file`);
        const text = await readFile(new URL(file, ROOT), 'utf8');
        for (const n of numbersIn(text)) held.add(n);
        for (const d of datesIn(text)) dates.add(d);
      }
      const missing = [...numbersIn(body!)].filter((n) => !held.has(n));
      assert.deepEqual(missing, [], `${page.name}: figures no file of ${files.join(', ')} holds`);
      const undated = [...datesIn(body!)].filter((d) => !dates.has(d));
      assert.deepEqual(undated, [], `${page.name}: dates of no run in ${files.join(', ')}`);
    }
  }
  assert.ok(blocks >= 3, `only ${blocks} figures blocks in docs/`);
});

test("docs/performance.md's figures table and docs/operations.md's recovery table are quoted blocks", async () => {
  const inBlock = (text: string, marker: string) => [...text.matchAll(BLOCK)].some((m) => m[2]!.includes(marker));
  const performance = await readFile(new URL('docs/performance.md', ROOT), 'utf8');
  assert.ok(inBlock(performance, '| what | figure | target |'), 'the figures table of docs/performance.md');
  const operations = await readFile(new URL('docs/operations.md', ROOT), 'utf8');
  assert.ok(inBlock(operations, '| recovery | median s |'), 'the recovery table of docs/operations.md');
});
