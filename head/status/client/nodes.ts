import { badge, bar, fmtAmount, fmtBytes, fmtMiB, fmtShare, html } from './html.js';
import type { Html } from './html.js';
import type { NodeQuery, StatusGpu, StatusNode, StatusSummary } from './protocol.js';

function gpuCard(node: StatusNode, g: StatusGpu): Html {
  const util =
    g.utilizationPct === null
      ? bar('Utilisation', null, 100, 'not reported')
      : bar(g.simulated ? 'Busy (actor compute)' : 'Utilisation', g.utilizationPct, 100, `${Math.round(g.utilizationPct)} %`, 'tone-util');
  const memory = g.simulated
    ? bar('Memory', null, g.memoryTotalMiB, `not measured · ${fmtMiB(g.memoryTotalMiB)}`)
    : bar(
        'Memory',
        g.memoryUsedMiB,
        g.memoryTotalMiB,
        g.memoryUsedMiB === null ? `? / ${fmtMiB(g.memoryTotalMiB)}` : `${fmtMiB(g.memoryUsedMiB)} / ${fmtMiB(g.memoryTotalMiB)}`,
        'tone-mem',
      );
  const allocated = bar('Allocated', g.allocated, 1, `${fmtShare(g.allocated)} of 1`, 'tone-alloc', false);
  const holders =
    g.holders.length === 0
      ? html`<div class="holders empty">free</div>`
      : html`<div class="holders">
          ${g.holders.map(
            (h) =>
              html`<span
                class="holder state-${h.state.toLowerCase()}"
                data-holder="${h.actor}"
                title="${h.actor} (${h.deployment}, ${h.state}) holds ${fmtShare(h.share)} of this GPU${h.memoryMiB !== null ? `, ${fmtMiB(h.memoryMiB)} of its memory` : ''}"
                ><span class="dot"></span>${h.actor}<span class="share">×${fmtShare(h.share)}</span
                >${h.memoryMiB !== null ? html`<span class="share">${fmtMiB(h.memoryMiB)}</span>` : ''}</span
              >`,
          )}
        </div>`;
  return html`<div class="gpu-card${g.simulated ? ' simulated' : ''}" data-gpu="${node.name}/${g.index}" data-simulated="${g.simulated}">
    <div class="gpu-head">
      <span class="gpu-index">GPU ${g.index}</span>
      <span class="gpu-name" title="${g.name}">${g.name}</span>
      ${g.simulated ? html`<span class="tag simulated-tag" title="--simulate-gpus: actors run on the CPU; utilisation is the share of time its actors spent computing">simulated</span>` : ''}
    </div>
    ${util}${memory}${allocated} ${holders}
  </div>`;
}

/** Actors on the node's CPUs only (GPU holders show on their GPU's card). */
function cpuActors(n: StatusNode): Html {
  if (n.cpuActorsTotal === 0) return html``;
  const more = n.cpuActorsTotal - n.cpuActors.length;
  return html`<div class="cpu-actors">
    <span class="muted small">On CPU</span>
    <div class="holders">
      ${n.cpuActors.map(
        (a) =>
          html`<span class="holder state-${a.state.toLowerCase()}" data-holder="${a.name}" title="${a.name} (${a.deployment}, ${a.state})"
            ><span class="dot"></span>${a.name}</span
          >`,
      )}${more > 0 ? html`<span class="muted small">and ${more} more</span>` : ''}
    </div>
  </div>`;
}

function nodeCard(n: StatusNode): Html {
  const cpu = bar('CPU', n.cpusAllocated, n.cpus, `${fmtAmount(n.cpusAllocated)} / ${fmtAmount(n.cpus)} allocated`, 'tone-cpu', false);
  const mem =
    n.memoryBytes > 0
      ? bar(
          'Memory',
          n.memoryAllocatedBytes,
          n.memoryBytes,
          `${fmtBytes(n.memoryAllocatedBytes)} / ${fmtBytes(n.memoryBytes)} reserved`,
          'tone-mem',
          false,
        )
      : bar('Memory', null, 1, 'not reported');
  return html`<article class="card node-card node-${n.state.toLowerCase()}" data-node="${n.name}" data-state="${n.state}">
    <header class="card-head">
      <h3>${n.name}</h3>
      ${badge(n.state)}
      <span class="muted mono" title="address the agent connected from">${n.address}</span>
      <span class="spacer"></span>
      <button type="button" class="link-button" data-node-actors="${n.name}" title="list this node's actors">
        ${n.actors} actor${n.actors === 1 ? '' : 's'}
      </button>
      <span class="muted"> ${n.gpus.length === 0 ? 'no GPUs' : `${n.gpus.length} GPU${n.gpus.length === 1 ? '' : 's'}`}</span>
    </header>
    <div class="node-resources">${cpu}${mem}</div>
    ${cpuActors(n)} ${n.gpus.length > 0 ? html`<div class="gpu-grid">${n.gpus.map((g) => gpuCard(n, g))}</div>` : ''}
  </article>`;
}

/** Nodes a page of the list holds: at 8 GPUs a card, a few screens. */
export const NODES_PAGE = 24;

/**
 * One page of nodes as cards. Sorted by state (the default), the page is grouped: a heading per
 * state with how many nodes in the cluster are in it.
 */
export function renderNodes(nodes: StatusNode[], query: NodeQuery, summary: StatusSummary): Html {
  if (summary.nodes.total === 0)
    return html`<p class="empty-note">No node has joined yet. Start one with <code>troupe agent --head ws://…</code>.</p>`;
  if (nodes.length === 0) return html`<p class="empty-note">No node matches the search.</p>`;
  const cards: Html[] = [];
  let state: string | undefined;
  for (const n of nodes) {
    if (query.sort === 'state' && n.state !== state) {
      state = n.state;
      cards.push(
        html`<h3 class="group-head" data-node-group="${n.state}">
          ${badge(n.state)} ${summary.nodes[n.state].toLocaleString('en-US')} node${summary.nodes[n.state] === 1 ? '' : 's'}
        </h3>`,
      );
    }
    cards.push(nodeCard(n));
  }
  return html`${cards}`;
}
