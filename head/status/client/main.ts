import { ActorsTable } from './actors.js';
import { CHARTS, Chart, SeriesBuffer } from './charts.js';
import type { LinkState } from './connection.js';
import { HeadLink } from './connection.js';
import { EVENTS_KEPT, renderEvents } from './events.js';
import { renderDeployments, renderGraphs } from './graphs.js';
import { byId, fmtAgo, fmtAmount, fmtNumber, html, setHtml } from './html.js';
import { ClusterModel } from './model.js';
import { NODES_PAGE, renderNodes } from './nodes.js';
import { onPage, renderPager } from './pager.js';
import { DEFAULT_NODE_QUERY } from './protocol.js';
import type { NodeQuery, StatusEvent, StatusUpdate } from './protocol.js';

/**
 * The status page: the head sends the cluster's summary and deployments, and one page (window)
 * of nodes and of actors, sorted and filtered as this page asks (`view`), then only what changed,
 * about once a second. No framework: each section is re-rendered from the model, and only touched
 * in the DOM when its HTML changed.
 */

const buffer = new SeriesBuffer();
const model = new ClusterModel();
let events: StatusEvent[] = [];
let latest: StatusUpdate | undefined;
let receivedAt = 0;
let link: LinkState = { kind: 'connecting' };
/** Set when the link drops, cleared once data flows again: the banner shows meanwhile. */
let disconnected = false;
let nodeQuery: NodeQuery = { ...DEFAULT_NODE_QUERY, limit: NODES_PAGE };

const charts = CHARTS.map((spec) => {
  const figure = document.querySelector<HTMLElement>(`[data-chart="${spec.key}"]`)!;
  return new Chart(
    spec,
    figure.querySelector<HTMLElement>('.chart-host')!,
    figure.querySelector<HTMLElement>('.chart-note')!,
    figure.querySelector<HTMLElement>('figcaption .section-note'),
  );
});

const actorsTable = new ActorsTable(
  byId('actors'),
  {
    filter: byId<HTMLInputElement>('actors-filter'),
    state: byId<HTMLSelectElement>('actors-state'),
    group: byId<HTMLSelectElement>('actors-group'),
  },
  () => askView(),
);
const eventsFilter = byId<HTMLInputElement>('events-filter');
eventsFilter.addEventListener('input', () => renderTables());

/** Whether this page looks at anything but the first page of each list, as the head shows a new stream. */
let ownView = false;

/** Sends the head what this page now looks at; the windows follow on the stream. */
function askView(): void {
  ownView = true;
  headLink.view(nodeQuery, actorsTable.query());
  if (latest) renderTables();
}

function setNodes(change: Partial<NodeQuery>, keepOffset = false): void {
  nodeQuery = { ...nodeQuery, ...change, ...(keepOffset ? {} : { offset: 0 }) };
  askView();
}

let nodeTyping: number | undefined;
const nodesFilter = byId<HTMLInputElement>('nodes-filter');
nodesFilter.addEventListener('input', () => {
  window.clearTimeout(nodeTyping);
  nodeTyping = window.setTimeout(() => setNodes({ text: nodesFilter.value.trim() }), 150);
});
const nodesState = byId<HTMLSelectElement>('nodes-state');
nodesState.addEventListener('change', () => setNodes({ state: nodesState.value as NodeQuery['state'] }));
const nodesSort = byId<HTMLSelectElement>('nodes-sort');
nodesSort.addEventListener('change', () =>
  setNodes({ sort: nodesSort.value as NodeQuery['sort'], descending: nodesSort.value === 'actors' }),
);
onPage(byId('nodes-pager'), (offset) => setNodes({ offset }, true));
onPage(byId('actors-pager'), (offset) => actorsTable.page(offset));

const showActors = (filter: { deployment?: string; node?: string }) => {
  actorsTable.only(filter);
  byId('actors-section').scrollIntoView({ block: 'start' });
};
document.addEventListener('click', (e) => {
  const target = e.target as Element;
  const node = target.closest<HTMLElement>('[data-node-actors]')?.dataset.nodeActors;
  if (node !== undefined) return showActors({ node });
  const deployment = target.closest<HTMLElement>('[data-deployment-actors]')?.dataset.deploymentActors;
  if (deployment !== undefined) return showActors({ deployment });
  const clear = target.closest<HTMLElement>('[data-clear]')?.dataset.clear;
  if (clear === 'node' || clear === 'deployment') actorsTable.only({ [clear]: '' });
});

function renderTables(): void {
  if (!latest) return;
  const actors = model.actors.rows();
  setHtml(byId('actors'), actorsTable.render(actors, model.actors.groups, latest.time, latest.summary.actors.total > 0));
  setHtml(byId('actors-scope'), actorsTable.renderScope());
  setHtml(byId('actors-pager'), renderPager('actors', model.actors.offset, actors.length, model.actors.total, actorsTable.query().limit));
  setHtml(byId('events'), renderEvents(events, eventsFilter.value));
}

function renderSummary(s: StatusUpdate): void {
  const { nodes, actors, gpus } = s.summary;
  const troubled = actors.DEAD + actors.RESTARTING + actors.PENDING;
  const rps = [...model.deployments.values()].reduce((sum, d) => sum + d.rps, 0);
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
      <span class="chip" id="nodes-alive"
        ><b>${nodes.ALIVE.toLocaleString('en-US')}</b>/${nodes.total.toLocaleString('en-US')} nodes alive</span
      >
      <span class="chip" title="${fmtAmount(gpus.allocated)} allocated to actors"
        ><b>${gpus.total.toLocaleString('en-US')}</b>
        GPU${gpus.total === 1 ? '' : 's'}${gpus.simulated > 0 ? ` (${gpus.simulated.toLocaleString('en-US')} simulated)` : ''}</span
      >
      <span class="chip${troubled > 0 ? ' chip-warn' : ''}" id="actors-ready"
        ><b>${actors.READY.toLocaleString('en-US')}</b>/${actors.total.toLocaleString('en-US')} actors ready</span
      >
      <span class="chip"
        ><b>${s.summary.deployments}</b> deployment${s.summary.deployments === 1 ? '' : 's'} ·
        <b>${s.summary.graphs}</b> graph${s.summary.graphs === 1 ? '' : 's'}</span
      >
      <span class="chip"><b>${fmtNumber(rps)}</b> req/s</span>
      <span
        class="chip${loop.p99Ms > 100 ? ' chip-warn' : ''}"
        title="how late the head's event loop ran over the last 10 s: p50 / p99 / max"
        >head loop delay <b>${fmtNumber(loop.p99Ms)}</b> ms p99 · ${fmtNumber(loop.maxMs)} max</span
      >`,
  );
}

/** Actors and resources by state, over the whole cluster: what the lists page through. */
function renderTotals(s: StatusUpdate): void {
  const { actors, gpus, cpus } = s.summary;
  const states = (['READY', 'STARTING', 'PENDING', 'RESTARTING', 'DRAINING', 'DEAD'] as const).filter((k) => actors[k] > 0);
  setHtml(
    byId('totals'),
    html`${states.map(
        (k) =>
          html`<button type="button" class="chip state-chip" data-actor-state="${k}" title="list the ${k} actors">
            <span class="dot state-${k.toLowerCase()}"></span><b>${actors[k].toLocaleString('en-US')}</b> ${k}
          </button>`,
      )}
      <span class="chip">GPUs <b>${fmtAmount(gpus.allocated)}</b> / ${gpus.total.toLocaleString('en-US')} allocated</span>
      <span class="chip">CPUs <b>${fmtAmount(cpus.allocated)}</b> / ${cpus.total.toLocaleString('en-US')} allocated</span>`,
  );
}
byId('totals').addEventListener('click', (e) => {
  const state = (e.target as Element).closest<HTMLElement>('[data-actor-state]')?.dataset.actorState;
  if (!state) return;
  const select = byId<HTMLSelectElement>('actors-state');
  select.value = state;
  select.dispatchEvent(new Event('change'));
  byId('actors-section').scrollIntoView({ block: 'start' });
});

function onUpdate(u: StatusUpdate): void {
  disconnected = false;
  latest = u;
  receivedAt = Date.now();
  model.apply(u);
  buffer.apply(u.series, u.seriesFull, u.historySeconds);
  if (u.full) events = [];
  const known = events.at(-1)?.seq ?? 0;
  events.push(...u.events.filter((e) => e.seq > known));
  if (events.length > EVENTS_KEPT) events = events.slice(-EVENTS_KEPT);
  // A new connection starts from the head's default view (the page's own until it changes one): ask again for this page's.
  if (u.full && ownView) headLink.view(nodeQuery, actorsTable.query());

  byId('content').hidden = false;
  byId('login').hidden = true;
  byId('history').textContent = `last ${Math.round(u.historySeconds / 60)} minutes, sampled every second by the head`;
  renderSummary(u);
  renderTotals(u);
  const nodes = model.nodes.rows();
  setHtml(byId('nodes'), renderNodes(nodes, nodeQuery, u.summary));
  setHtml(byId('nodes-pager'), renderPager('nodes', model.nodes.offset, nodes.length, model.nodes.total, nodeQuery.limit));
  const deployments = [...model.deployments.values()];
  setHtml(byId('graphs'), renderGraphs(model.graphs, deployments));
  setHtml(byId('deployments'), renderDeployments(deployments));
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

const headLink = new HeadLink(onUpdate, onLinkState);
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
