import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { test } from 'node:test';

// The quoting convention (docs/performance.md#how-figures-are-quoted): a block of a page between
// `<!-- figures from bench/RESULTS-x.md bench/RESULTS-y.md -->` and `<!-- end of figures -->` quotes
// figures, and every number in it is one that a file it names holds; every date in it (YYYY-MM-DD)
// is one of those files' dates, and the block or the 600 characters before it give one of them.
// Exempt: targets (a number after ≤ or ≥), times of day, what is in `code` (commands, flags) and
// link targets. Outside the blocks a page quotes no measured figure at all (unquotedFigures). Each
// results file has one generator, which writes all of it: a figure no file holds was measured
// nowhere that can be run again.

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

// Outside the blocks, a page quotes no measurement at all: a figure is a number with a unit of
// time, rate, size, share or ratio (0.42 ms, 26,564 req/s, 9.1 MB, 94%, 1.3x), and one that is no
// quote of a run is written as what it is: in `code` (commands, flags), or as a bound, setting or
// target, said by the word before it (at most 64 KiB, default 60 s, every 250 ms, within 5 s,
// ≤ 0.3 ms, a flag's `--max-body-mib` (64)) or after it (100 ms doubling, 64 KiB and more), or as
// the size of a workload's input (588 KiB images). In a table whose header names a unit, a
// percentile or a run's time, a bare number in a cell is a figure too.
const FIGURE =
  /(?<![\w.,/-])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s?(?:-|–|to)\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)?(?:x(?!\w)|%|\s(?:ns|µs|us|ms|s|seconds?|minutes?|hours?|[A-Za-z]+\/s|a second|B|[kKMGT]i?B)(?![\w/]))/g;
/** What, just before a number, makes it a bound, setting or target rather than a measurement. */
const BOUND_BEFORE =
  /(?:[≤≥<>]|\b(?:at most|at least|up to|within|under|over|past|above|below|beyond|more than|less than|fewer than|default(?:s to| of| is)?|every|after|bounded at|capped at|limited to|doubling to|of at most|for|than|then)|\uE000\s*[(:=,]?(?:\s*default)?)\s*\(?(?:\s*(?:about|roughly|some))?\s*$/i;
/**
 * What, just after a number, makes it a threshold, a schedule or a benchmark's own setting (100 ms
 * doubling, 64 KiB and more, 2 s windows, 6 s per mode) or the size of what a workload sends (a
 * 588 KiB image, 29 MB JSON bodies) rather than a measurement.
 */
const BOUND_AFTER =
  /^\s*,?\s*(?:doubling|and (?:more|over|up|above|larger)|or (?:more|over|larger|less|fewer)|at most)\b|^\s+(?:per|each|a row|windows?|rounds?|closed loop)\b/i;
/** A size right after what it is the size of: items of 64 KiB, a send buffer at 16 KiB. */
const INPUT_BEFORE = /\b(?:images?|items?|frames?|chunks?|inputs?|bod(?:y|ies)|tensors?|buffers?|requests?|files?) (?:of|at)\s*$/i;
const INPUT_AFTER = /^\s+(?:JSON |binary |MobileNet )?(?:images?|items?|frames?|chunks?|inputs?|bod(?:y|ies)|tensors?|requests?|files?)\b/i;

/** Each line of a page as read for figures: code, comments, link targets and marked blocks blanked (a code span becomes \uE000). */
function proseLines(text: string): string[] {
  let fenced = false;
  let block = false;
  const prose = text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    if (line.includes('<!-- figures from ')) block = true;
    if (line.includes('<!-- end of figures -->')) {
      block = false;
      return '';
    }
    if (fenced || block) return '';
    return line.replace(/<!--.*?-->/g, ' ').replace(/\]\([^)]*\)/g, ']');
  });
  // A code span may wrap onto the next line: blanked over the whole text, its line breaks kept.
  return prose
    .join('\n')
    .replace(/`[^`]*`/g, (span) => `\uE000${span.replace(/[^\n]/g, '')}`)
    .split('\n');
}

/** A table header that says its cells are measurements: a unit, a percentile or rate, a run's time of day. */
const MEASURED_HEADER =
  /\b(?:ns|µs|us|ms|seconds|MiB|MB|KiB|KB|GiB|GB|p\d\d|median|mean|throughput|latency|RSS|CPU|calls|req|per second)\b|(?<=[\s(])s\b|\/s\b|%|\b\d{1,2}:\d{2}\b|\bvs\b/i;
/** A table cell that is a bare number, range or list of them (0.42, 26,564, 0.19-0.23, 1.2 / 3.4). */
const NUMERIC_CELL = /^\s*(?:\*\*)?[\d.,]+(?:\s*(?:-|–|\/)\s*[\d.,]+)*x?(?:\*\*)?\s*$/;

/** The figures a page quotes outside its blocks: `line: figure || the text around it`. */
function unquotedFigures(text: string): string[] {
  const out: string[] = [];
  const lines = proseLines(text);
  let header: string | undefined;
  lines.forEach((line, i) => {
    // Tables: a row's bare numbers are figures when the header says what they measure.
    if (!line.startsWith('|')) header = undefined;
    else if (header === undefined) header = line;
    else if (!/^\|[\s:|-]+\|?$/.test(line) && MEASURED_HEADER.test(header))
      for (const cell of line.split('|').slice(1, -1))
        if (NUMERIC_CELL.test(cell) && /\d/.test(cell) && !/^\s*\d{1,2}\s*$/.test(cell))
          out.push(`${i + 1}: ${cell.trim()}  ||  ${line.slice(0, 80)}`);
    let boundEnd = -1;
    for (const m of line.matchAll(FIGURE)) {
      // A sentence may wrap: the word before a figure at the start of a line ends the line above.
      const before = `${lines[i - 1] ?? ''} ${line.slice(0, m.index)}`;
      const after = line.slice(m.index + m[0].length);
      // A list of bounds continues the first one: "after 1 s, 2 s, then 5 s", "60 s, 10,000 calls or 64 MiB".
      const listed = boundEnd >= 0 && /^[\s\w,;/]{0,24}$/.test(line.slice(boundEnd, m.index));
      const inputSize = m[0].endsWith('B') && (INPUT_AFTER.test(after) || INPUT_BEFORE.test(before));
      if (BOUND_BEFORE.test(before) || BOUND_AFTER.test(after) || inputSize || listed) {
        boundEnd = m.index + m[0].length;
        continue;
      }
      boundEnd = -1;
      out.push(
        `${i + 1}: ${m[0]}  ||  ${line
          .slice(Math.max(0, m.index - 50), m.index + m[0].length + 30)
          .replace(/\uE000/g, '`…`')
          .trim()}`,
      );
    }
  });
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
    for (const { 0: whole, 1: names, 2: body, index } of page.text.matchAll(BLOCK)) {
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
      // Quoted with their date: the block, or the paragraph that introduces it, names a run of a file it quotes.
      const introduced = [...datesIn(page.text.slice(Math.max(0, index! - 600), index! + whole.length))].some((d) => dates.has(d));
      assert.ok(introduced, `${page.name}: the block quoting ${files.join(', ')} gives no date of their runs (${[...dates].join(', ')})`);
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

test('unquotedFigures finds measurements and lets bounds, settings, targets and code be', () => {
  const found = unquotedFigures(
    [
      'A call took 0.42 ms (26,564 req/s, 1.3x, 94% busy, 9.1 MB installed, 1.5-1.8x).',
      'At most 64 KiB, default 60 s, every 250 ms, within 5 s, ≤ 0.3 ms, `--max-body-mib` (64 MiB), 100 ms doubling to 30 s.',
      'After 1 s, 2 s, then every 5 s; inputs of 64 KiB and more; `sleep 10 s`; a 1400x1000 image; 14 x 29; 588 KiB images; items of 64 KiB; leading 1s.',
      '<!-- figures from bench/RESULTS.md -->',
      'Quoted: 0.152 ms.',
      '<!-- end of figures -->',
      '```',
      'took 3.2 ms',
      '```',
      '| path | p50 ms | replicas |',
      '| --- | ---: | ---: |',
      '| SDK | 0.152 | 2 |',
      '| limit | flag |',
      '| --- | --- |',
      '| body | 64 |',
    ].join('\n'),
  ).map((f) => f.split('  ||')[0]);
  assert.deepEqual(found, ['1: 0.42 ms', '1: 26,564 req/s', '1: 1.3x', '1: 94%', '1: 9.1 MB', '1: 1.5-1.8x', '12: 0.152']);
});

test('docs/ and the README quote no measured figure outside a figures block', async () => {
  const unquoted = (await pages()).flatMap((page) => unquotedFigures(page.text).map((f) => `${page.name}:${f}`));
  assert.deepEqual(
    unquoted,
    [],
    `figures outside a \`<!-- figures from bench/RESULTS-….md -->\` block (move them into one quoting the results file, with its date, or write a bound as one: "at most", "default", \`code\`):\n${unquoted.join('\n')}`,
  );
});

test('every results file names its generator in its header', async () => {
  const files = (await readdir(new URL('bench/', ROOT))).filter((f) => /^RESULTS[\w-]*\.md$/.test(f));
  assert.ok(files.length >= 10, `only ${files.length} results files`);
  for (const file of files) {
    const head = (await readFile(new URL(`bench/${file}`, ROOT), 'utf8')).split('\n').slice(0, 6).join('\n');
    assert.match(head, /^- generator: /m, `bench/${file} names no generator in its first lines (bench/lib/system.ts systemLine)`);
  }
});
