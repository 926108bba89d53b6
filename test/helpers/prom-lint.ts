/**
 * The checks `promtool check metrics` makes of a Prometheus text exposition (its parser and its
 * lint: help text, counters named `_total` and nothing else so named, no histogram suffixes on
 * other types), for machines where promtool is not installed. Returns one line per problem.
 */

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (\S+)(?: -?\d+)?$/;
/** Go's ParseFloat, as promtool reads values: NaN and Inf in any case (prom-client writes 'Nan'). */
const VALUE = /^(?:[+-]?(?:\d+\.?\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?)|[+-]?inf(?:inity)?|nan)$/i;

interface Family {
  type: string | undefined;
  help: boolean;
}

/** The family a sample belongs to: `x_bucket`, `x_sum` and `x_count` are `x`'s where `x` is a histogram or summary. */
function familyOf(name: string, families: Map<string, Family>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = families.get(base)?.type;
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return name;
}

export function lintExposition(text: string): string[] {
  const problems: string[] = [];
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  const family = (name: string) => families.get(name) ?? (families.set(name, { type: undefined, help: false }), families.get(name)!);
  text.split('\n').forEach((line, i) => {
    const at = `line ${i + 1}`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const [, keyword, name] = line.split(' ');
      if (keyword !== 'HELP' && keyword !== 'TYPE') return;
      if (!name || !NAME.test(name)) return void problems.push(`${at}: bad metric name in '${line}'`);
      if (keyword === 'HELP') family(name).help = true;
      else {
        const type = line.split(' ')[3];
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(type ?? '')) problems.push(`${at}: unknown type '${type}'`);
        if (family(name).type) problems.push(`${at}: second TYPE line for ${name}`);
        family(name).type = type;
      }
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) return void problems.push(`${at}: not a sample: '${line}'`);
    const [, name, labels = '', value] = m;
    if (!VALUE.test(value!)) problems.push(`${at}: value '${value}' is not a number`);
    const series = `${name}${labels}`;
    if (seen.has(series)) problems.push(`${at}: duplicate series ${series}`);
    seen.add(series);
    const f = families.get(familyOf(name!, families));
    if (!f?.type) problems.push(`${at}: ${name} has no TYPE line before it`);
    if (f?.type === 'counter' && Number(value) < 0) problems.push(`${at}: counter ${name} is negative`);
  });
  for (const [name, f] of families) {
    if (!f.help) problems.push(`${name}: no help text`);
    if (f.type === 'counter' && !name.endsWith('_total')) problems.push(`${name}: counter metrics should have "_total" suffix`);
    if (f.type !== 'counter' && name.endsWith('_total')) problems.push(`${name}: non-counter metrics should not have "_total" suffix`);
    if (f.type !== 'histogram' && f.type !== 'summary') {
      for (const suffix of ['_count', '_sum', '_bucket'])
        if (name.endsWith(suffix)) problems.push(`${name}: non-histogram and non-summary metrics should not have "${suffix}" suffix`);
    }
  }
  return problems;
}
