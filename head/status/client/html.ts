/**
 * HTML built from template literals in which every interpolated value is escaped unless it is
 * itself `Html`: names, reasons and stderr lines come from the cluster and must never become markup.
 */
export class Html {
  constructor(readonly text: string) {}
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escape(String(value));
}

/** @example html`<td title="${reason}">${name}</td>` */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(out);
}

const shown = new WeakMap<Element, string>();

/** Replaces an element's content only when it changed, so an unchanged section keeps its selection and focus. */
export function setHtml(el: Element, content: Html): void {
  if (shown.get(el) === content.text) return;
  shown.set(el, content.text);
  el.innerHTML = content.text;
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

export function fmtMs(ms: number | null): string {
  if (ms === null) return '–';
  if (ms === 0) return '0';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

export function fmtNumber(n: number | null, digits = 1): string {
  if (n === null) return '–';
  if (n === 0) return '0';
  return Math.abs(n) < 10 ? n.toFixed(digits) : Math.round(n).toLocaleString('en-US');
}

/** A count and its noun: "1 model", "2 models" (runtime/plural.ts, for the page). */
export function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count.toLocaleString('en-US')} ${count === 1 ? noun : nouns}`;
}

/** CPUs or GPUs as a person writes them: exact to the thousandth the head counts in (0.35, 1,024). */
export function fmtAmount(n: number): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: 3 });
}

export function fmtBytes(bytes: number): string {
  if (bytes === 0) return '0';
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
  if (bytes >= 2 ** 20) return `${Math.round(bytes / 2 ** 20)} MiB`;
  return `${Math.round(bytes / 1024)} KiB`;
}

export function fmtMiB(mib: number): string {
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`;
}

/** A fraction of a GPU as people write it: 1, 0.5, 0.25. */
export function fmtShare(share: number): string {
  return String(Math.round(share * 100) / 100);
}

export function fmtClock(time: number): string {
  return new Date(time).toLocaleTimeString('en-GB', { hour12: false });
}

export function fmtAgo(time: number, now: number): string {
  const s = Math.max(0, Math.round((now - time) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

/**
 * A horizontal bar: `value` of `max`, with a caption; null draws an empty bar. Use bars turn
 * amber and red as they fill; allocation bars (`levels` false) do not, a full one is normal.
 */
export function bar(label: string, value: number | null, max: number, caption: string, tone = '', levels = true): Html {
  const pct = value === null || max <= 0 ? 0 : Math.max(0, Math.min(100, (value / max) * 100));
  const level = !levels ? '' : pct >= 90 ? 'hot' : pct >= 70 ? 'warm' : '';
  return html`<div class="bar ${tone} ${level}">
    <div class="bar-head"><span>${label}</span><span class="bar-caption">${caption}</span></div>
    <div class="bar-track"><div class="bar-fill" style="width:${pct.toFixed(1)}%"></div></div>
  </div>`;
}

/** A state as a coloured badge. */
export function badge(state: string, extra = ''): Html {
  return html`<span class="badge state-${state.toLowerCase()} ${extra}">${state}</span>`;
}
