import { ActorsTable } from './actors.js';
import { CHARTS, Chart, SeriesBuffer } from './charts.js';
import type { LinkState } from './connection.js';
import { HeadLink } from './connection.js';
import { EVENTS_KEPT, renderEvents } from './events.js';
import { renderDeployments, renderGraphs } from './graphs.js';
import { byId, fmtAgo, fmtNumber, html, setHtml } from './html.js';
import { renderNodes } from './nodes.js';
import type { StatusEvent, StatusSnapshot } from './protocol.js';

/**
 * The status page: one snapshot from the head about once a second, drawn into the sections of
 * index.html. No framework: each section is re-rendered from the snapshot, and only touched in
 * the DOM when its HTML changed.
 */

const buffer = new SeriesBuffer();
let events: StatusEvent[] = [];
let latest: StatusSnapshot | undefined;
let receivedAt = 0;
let link: LinkState = { kind: 'connecting' };
/** Set when the link drops, cleared once data flows again: the banner shows meanwhile. */
let disconnected = false;

const charts = CHARTS.map((spec) => {
  const figure = document.querySelector<HTMLElement>(`[data-chart="${spec.key}"]`)!;
  return new Chart(spec, figure.querySelector<HTMLElement>('.chart-host')!, figure.querySelector<HTMLElement>('.chart-note')!);
});

const actorsTable = new ActorsTable(byId('actors'), byId<HTMLInputElement>('actors-filter'), byId<HTMLSelectElement>('actors-state'), () =>
  renderTables(),
);
const eventsFilter = byId<HTMLInputElement>('events-filter');
eventsFilter.addEventListener('input', () => renderTables());

function renderTables(): void {
  if (!latest) return;
  setHtml(byId('actors'), actorsTable.render(latest.actors, latest.time));
  setHtml(byId('events'), renderEvents(events, eventsFilter.value));
}

function renderSummary(s: StatusSnapshot): void {
  const alive = s.nodes.filter((n) => n.state === 'ALIVE').length;
  const gpus = s.nodes.flatMap((n) => (n.state === 'DEAD' ? [] : n.gpus));
  const simulated = gpus.filter((g) => g.simulated).length;
  const ready = s.actors.filter((a) => a.state === 'READY').length;
  const troubled = s.actors.filter((a) => a.state === 'DEAD' || a.state === 'RESTARTING' || a.state === 'PENDING').length;
  const rps = s.deployments.reduce((sum, d) => sum + d.rps, 0);
  const loop = s.headLoopDelay;
  setHtml(
    byId('summary'),
    html`<span
        class="chip${s.readiness.ready ? '' : ' chip-warn'}"
        id="readiness"
        data-ready="${s.readiness.ready}"
        title="${s.readiness.ready ? 'the answer of /readyz and /v2/health/ready' : (s.readiness.reason ?? '')}"
        >${s.readiness.ready ? html`<b>ready</b>` : html`<b>not ready</b>: ${s.readiness.reason ?? ''}`}</span
      >
      <span class="chip"><b>${alive}</b>/${s.nodes.length} nodes alive</span>
      <span class="chip"><b>${gpus.length}</b> GPU${gpus.length === 1 ? '' : 's'}${simulated > 0 ? ` (${simulated} simulated)` : ''}</span>
      <span class="chip${troubled > 0 ? ' chip-warn' : ''}"><b>${ready}</b>/${s.actors.length} actors ready</span>
      <span class="chip"
        ><b>${s.deployments.length}</b> deployment${s.deployments.length === 1 ? '' : 's'} ·
        <b>${s.graphs.length}</b> graph${s.graphs.length === 1 ? '' : 's'}</span
      >
      <span class="chip"><b>${fmtNumber(rps)}</b> req/s</span>
      <span
        class="chip${loop.p99Ms > 100 ? ' chip-warn' : ''}"
        title="how late the head's event loop ran over the last 10 s: p50 / p99 / max"
        >head loop delay <b>${fmtNumber(loop.p99Ms)}</b> ms p99 · ${fmtNumber(loop.maxMs)} max</span
      >`,
  );
}

function onSnapshot(s: StatusSnapshot): void {
  disconnected = false;
  latest = s;
  receivedAt = Date.now();
  buffer.apply(s.series, s.full, s.historySeconds);
  if (s.full) events = [];
  const known = events.at(-1)?.seq ?? 0;
  events.push(...s.events.filter((e) => e.seq > known));
  if (events.length > EVENTS_KEPT) events = events.slice(-EVENTS_KEPT);

  byId('content').hidden = false;
  byId('login').hidden = true;
  byId('history').textContent = `last ${Math.round(s.historySeconds / 60)} minutes, sampled every second by the head`;
  renderSummary(s);
  setHtml(byId('nodes'), renderNodes(s.nodes, s.actors));
  setHtml(byId('graphs'), renderGraphs(s.graphs, s.deployments, s.actors));
  setHtml(byId('deployments'), renderDeployments(s.deployments, s.actors));
  renderTables();
  for (const c of charts) c.update(buffer);
  renderLink();
}

function renderLink(): void {
  const el = byId('link');
  const banner = byId('banner');
  el.dataset.state = link.kind;
  document.body.classList.toggle('stale', disconnected);
  switch (link.kind) {
    case 'live':
      el.textContent = receivedAt > 0 ? `live · updated ${fmtAgo(receivedAt, Date.now())}` : 'live';
      break;
    case 'connecting':
      el.textContent = disconnected ? 'reconnecting…' : 'connecting…';
      break;
    case 'down':
      el.textContent = 'offline';
      break;
    case 'login':
      el.textContent = 'login needed';
      break;
  }
  banner.hidden = !disconnected;
  if (disconnected) {
    const wait = link.kind === 'down' ? Math.max(0, Math.ceil((link.retryAt - Date.now()) / 1000)) : 0;
    const why = link.kind === 'down' ? link.why : 'the connection to the head was lost';
    const seen = receivedAt > 0 ? ` Showing what it reported ${fmtAgo(receivedAt, Date.now())}.` : '';
    banner.textContent = `Disconnected from the head: ${why}. ${wait > 0 ? `Reconnecting in ${wait} s` : 'Reconnecting now'}…${seen}`;
  }
}

function onLinkState(state: LinkState): void {
  link = state;
  if (state.kind === 'down') disconnected = true;
  if (state.kind === 'login') {
    disconnected = false;
    byId('login').hidden = false;
    byId('content').hidden = true;
    const error = byId('login-error');
    error.hidden = state.error === null;
    error.textContent = state.error ?? '';
  }
  renderLink();
}

const headLink = new HeadLink(onSnapshot, onLinkState);
byId<HTMLFormElement>('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = byId<HTMLInputElement>('login-token');
  const token = input.value;
  // The token leaves the page at once: the head answers with an HttpOnly session cookie.
  input.value = '';
  void headLink.login(token);
});
window.setInterval(renderLink, 500);
headLink.start();
