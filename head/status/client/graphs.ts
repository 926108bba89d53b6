import dagre from '@dagrejs/dagre';
import { badge, fmtMs, fmtNumber, html, plural } from './html.js';
import type { Html } from './html.js';
import type { ActorStateName, Dag, DagNode, StatusDeployment, StatusGraph } from './protocol.js';
import { versionLines } from './versions.js';

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

interface Layout {
  width: number;
  height: number;
  nodes: Map<string, Box>;
  groups: Map<string, Box>;
  edges: { from: string; to: string; points: { x: number; y: number }[] }[];
}

const SIZE: Record<DagNode['kind'], { width: number; height: number }> = {
  model: { width: 206, height: 80 },
  fn: { width: 206, height: 80 },
  input: { width: 84, height: 30 },
  output: { width: 84, height: 30 },
  combine: { width: 150, height: 34 },
  split: { width: 150, height: 34 },
  merge: { width: 150, height: 34 },
};

/** Layouts by graph structure: dagre runs when a graph changes, not on every update. */
const layouts = new Map<string, Layout>();

function layout(dag: Dag): Layout {
  const key = JSON.stringify(dag);
  const known = layouts.get(key);
  if (known) return known;
  const g = new dagre.graphlib.Graph({ compound: true });
  g.setGraph({ rankdir: 'LR', nodesep: 22, ranksep: 46, marginx: 14, marginy: 14 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const group of dag.groups) g.setNode(group.id, { width: 0, height: 0, paddingTop: 26 });
  for (const group of dag.groups) if (group.group) g.setParent(group.id, group.group);
  for (const n of dag.nodes) {
    g.setNode(n.id, { ...SIZE[n.kind] });
    if (n.group) g.setParent(n.id, n.group);
  }
  for (const e of dag.edges) g.setEdge(e.from, e.to);
  dagre.layout(g);
  const box = (id: string): Box => {
    const n = g.node(id) as { x: number; y: number; width: number; height: number };
    return { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height };
  };
  const result: Layout = {
    width: Math.ceil(g.graph().width ?? 0),
    height: Math.ceil(g.graph().height ?? 0),
    nodes: new Map(dag.nodes.map((n) => [n.id, box(n.id)])),
    groups: new Map(dag.groups.map((gr) => [gr.id, box(gr.id)])),
    edges: dag.edges.map((e) => ({ ...e, points: (g.edge(e.from, e.to) as { points?: { x: number; y: number }[] }).points ?? [] })),
  };
  if (layouts.size > 64) layouts.clear();
  layouts.set(key, result);
  return result;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** States in the order their dots are drawn: the ones that need a look first. */
const DOT_ORDER: ActorStateName[] = ['DEAD', 'RESTARTING', 'PENDING', 'STARTING', 'DRAINING', 'READY'];
/** Past this many replicas a deployment's states are drawn as one stacked bar, not a dot each. */
const DOTS_MAX = 16;

/** A deployment's replicas' states, one entry per replica, worst first. */
function replicaStates(d: StatusDeployment | undefined): ActorStateName[] {
  return DOT_ORDER.flatMap((state) => Array.from({ length: d?.states[state] ?? 0 }, () => state));
}

/** One dot per replica, coloured by its state (a bar of the states' shares past DOTS_MAX): how a step's replicas are doing at a glance. */
function replicaDots(d: StatusDeployment | undefined, x: number, y: number): { dots: Html; width: number } {
  const states = replicaStates(d);
  if (states.length <= DOTS_MAX)
    return {
      dots: html`${states.map((s, i) => html`<circle class="replica state-${s.toLowerCase()}" cx="${x + i * 11}" cy="${y}" r="4"><title>${s}</title></circle>`)}`,
      width: Math.max(1, states.length) * 11,
    };
  const width = 120;
  let at = x - 4;
  const parts = DOT_ORDER.filter((s) => (d?.states[s] ?? 0) > 0).map((s) => {
    const w = (width * d!.states[s]!) / states.length;
    const part = html`<rect class="replica state-${s.toLowerCase()}" x="${at.toFixed(1)}" y="${y - 4}" width="${w.toFixed(1)}" height="8"
      ><title>${d!.states[s]} ${s}</title></rect
    >`;
    at += w;
    return part;
  });
  return { dots: html`${parts}`, width: width + 2 };
}

/** A deployment's replicas' states as dots (a stacked bar when there are many), for the deployments table. */
export function stateDots(d: StatusDeployment): Html {
  const states = replicaStates(d);
  if (states.length <= 40) return html`${states.map((s) => html`<span class="dot state-${s.toLowerCase()}" title="${s}"></span>`)}`;
  return html`<span class="state-bar"
    >${DOT_ORDER.filter((s) => (d.states[s] ?? 0) > 0).map(
      (s) => html`<span class="state-${s.toLowerCase()}" style="flex:${d.states[s]}" title="${d.states[s]} ${s}"></span>`,
    )}</span
  >`;
}

function stepBox(n: DagNode, b: Box, deployments: Map<string, StatusDeployment>): Html {
  const d = n.deployment ? deployments.get(n.deployment) : undefined;
  if (n.kind !== 'model' && n.kind !== 'fn') {
    return html`<g class="dag-node dag-${n.kind}">
      <rect x="${b.x}" y="${b.y}" width="${b.width}" height="${b.height}" rx="${n.kind === 'input' || n.kind === 'output' ? 15 : 6}"></rect>
      <text x="${b.x + b.width / 2}" y="${b.y + b.height / 2 + 4}" text-anchor="middle">${clip(n.label, 24)}</text>
    </g>`;
  }
  const ready = d?.states.READY ?? 0;
  const state = d?.state ?? 'DEPLOYING';
  const x = b.x + 10;
  const dots = replicaDots(d, x + 4, b.y + 33);
  return html`<g class="dag-node dag-step deployment-${state.toLowerCase()}" data-step="${n.label}">
    <title>${n.kind} ${n.label}${d ? ` (${d.model})` : ''}: ${state}</title>
    <rect x="${b.x}" y="${b.y}" width="${b.width}" height="${b.height}" rx="7"></rect>
    <text class="step-name" x="${x}" y="${b.y + 18}">${clip(n.label, 22)}</text>
    <text class="step-kind" x="${b.x + b.width - 10}" y="${b.y + 18}" text-anchor="end">${n.kind}</text>
    ${dots.dots}
    <text class="step-line" x="${x + dots.width + 2}" y="${b.y + 37}">${ready}/${d?.replicas ?? 0} ready</text>
    <text class="step-line" x="${x}" y="${b.y + 54}"
      >${d ? `${fmtNumber(d.rps)} req/s · batch ${d.meanBatch === null ? '–' : d.meanBatch.toFixed(1)}` : '–'}</text
    >
    <text class="step-line" x="${x}" y="${b.y + 70}">${d ? `p50 ${fmtMs(d.p50Ms)} · p99 ${fmtMs(d.p99Ms)}` : ''}</text>
  </g>`;
}

function graphSvg(graph: StatusGraph, index: number, deployments: Map<string, StatusDeployment>): Html {
  const l = layout(graph.dag);
  const arrow = `arrow-${index}`;
  const groups = graph.dag.groups.map((gr) => {
    const b = l.groups.get(gr.id)!;
    return html`<g class="dag-group"
      ><rect x="${b.x}" y="${b.y}" width="${b.width}" height="${b.height}" rx="9"></rect
      ><text x="${b.x + 9}" y="${b.y + 16}">${gr.label}</text></g
    >`;
  });
  const edges = l.edges.map((e) => {
    const d = e.points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ');
    return html`<path class="dag-edge" d="${d}" marker-end="url(#${arrow})"></path>`;
  });
  const nodes = graph.dag.nodes.map((n) => stepBox(n, l.nodes.get(n.id)!, deployments));
  return html`<svg
    class="dag"
    data-graph="${graph.name}"
    viewBox="0 0 ${l.width} ${l.height}"
    width="${l.width}"
    height="${l.height}"
    style="max-width:100%;height:auto"
    role="img"
    aria-label="graph ${graph.name}"
  >
    <defs>
      <marker id="${arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
        <path d="M0,0 L10,5 L0,10 z"></path>
      </marker>
    </defs>
    ${groups}${edges}${nodes}
  </svg>`;
}

export function renderGraphs(graphs: StatusGraph[], deployments: StatusDeployment[]): Html {
  if (graphs.length === 0)
    return html`<p class="empty-note">
      No graph is deployed. Graphs (pipelines, ensembles, data-parallel steps) deployed with the SDK or the HTTP API are drawn here.
    </p>`;
  const byName = new Map(deployments.map((d) => [d.name, d]));
  return html`${graphs.map(
    (g, i) =>
      html`<article class="card graph-card" data-graph-card="${g.name}">
        <header class="card-head">
          <h3>${g.name}</h3>
          <span class="tag">${g.kind}</span>
          <span class="muted">${g.steps} step${g.steps === 1 ? '' : 's'} per run</span>
        </header>
        <div class="dag-wrap">${graphSvg(g, i, byName)}</div>
      </article>`,
  )}`;
}

export function renderDeployments(deployments: StatusDeployment[]): Html {
  if (deployments.length === 0) return html`<p class="empty-note">Nothing is deployed yet.</p>`;
  const rows = deployments.map((d) => {
    const ready = d.states.READY ?? 0;
    return html`<tr data-deployment="${d.name}">
      <td>
        <button type="button" class="link-button" data-deployment-actors="${d.name}" title="list this deployment's actors">
          <strong>${d.name}</strong>
        </button>
        <span class="tag">${d.kind}</span>
      </td>
      <td class="mono muted" title="${d.model}">
        ${d.versions ? versionLines(d) : clip(d.model, 36)}${d.models ? modelsLine(d.models) : ''}${
          d.layout ? html`<div class="small layout" title="${d.layout.reason}">${clip(d.layout.chosen, 90)}</div>` : ''
        }
      </td>
      <td>${badge(d.state)}${d.unhealthy ? html`<div class="reason" title="${d.unhealthy}">${clip(d.unhealthy, 90)}</div>` : ''}</td>
      <td>
        <span class="dots">${stateDots(d)}</span>
        ${ready}/${d.replicas}${d.versions ? html`<div class="muted small">its versions' replicas</div>` : ''}
      </td>
      <td class="num">${fmtNumber(d.rps)}</td>
      <td class="num">${fmtMs(d.p50Ms)}</td>
      <td class="num">${fmtMs(d.p99Ms)}</td>
      <td class="num">${d.meanBatch === null ? '–' : d.meanBatch.toFixed(1)}</td>
      <td class="num">${d.queued}</td>
      <td class="num">${d.ok.toLocaleString('en-US')}</td>
      <td class="num${d.failed > 0 ? ' bad' : ''}">${d.failed.toLocaleString('en-US')}</td>
    </tr>`;
  });
  return html`<table class="grid-table">
    <thead>
      <tr>
        <th>Deployment</th>
        <th>Model</th>
        <th>State</th>
        <th>Replicas</th>
        <th class="num">req/s</th>
        <th class="num">p50</th>
        <th class="num">p99</th>
        <th class="num">Mean batch</th>
        <th class="num" title="calls waiting in the head">Queued</th>
        <th class="num">OK</th>
        <th class="num">Failed</th>
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`;
}

/** A multiplexed deployment's most called models: each one's share of hits, loads and replicas holding it. */
function modelsLine(models: NonNullable<StatusDeployment['models']>): Html {
  const calls = (m: (typeof models)[number]) => m.hits + m.misses;
  const line = models
    .slice(0, 3)
    .map((m) => `${m.name} ${calls(m) === 0 ? '–' : Math.round((100 * m.hits) / calls(m))}% hits`)
    .join(' · ');
  const detail = models
    .map(
      (m) =>
        `${m.name}: ${plural(calls(m), 'call')}, ${plural(m.hits, 'hit')}, ${plural(m.misses, 'miss', 'misses')}, ${plural(m.loads, 'load')}, on ${plural(m.replicas, 'replica')}`,
    )
    .join('\n');
  return html`<div class="small" data-models title="${detail}">${line}</div>`;
}
