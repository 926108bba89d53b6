import { badge, bar, fmtBytes, fmtMiB, fmtNumber, fmtShare, html } from './html.js';
import type { Html } from './html.js';
import type { StatusActor, StatusGpu, StatusNode } from './protocol.js';

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
function cpuActors(n: StatusNode, actors: StatusActor[]): Html {
  const here = actors.filter((a) => a.node === n.name && a.gpus.length === 0 && a.state !== 'PENDING' && a.state !== 'DEAD');
  if (here.length === 0) return html``;
  return html`<div class="cpu-actors">
    <span class="muted small">On CPU</span>
    <div class="holders">
      ${here.map(
        (a) =>
          html`<span class="holder state-${a.state.toLowerCase()}" data-holder="${a.name}" title="${a.name} (${a.deployment}, ${a.state})"
            ><span class="dot"></span>${a.name}</span
          >`,
      )}
    </div>
  </div>`;
}

function nodeCard(n: StatusNode, actors: StatusActor[]): Html {
  const cpu = bar('CPU', n.cpusAllocated, n.cpus, `${fmtNumber(n.cpusAllocated)} / ${n.cpus} allocated`, 'tone-cpu', false);
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
      <span class="muted"
        >${n.actors} actor${n.actors === 1 ? '' : 's'} ·
        ${n.gpus.length === 0 ? 'no GPUs' : `${n.gpus.length} GPU${n.gpus.length === 1 ? '' : 's'}`}</span
      >
    </header>
    <div class="node-resources">${cpu}${mem}</div>
    ${cpuActors(n, actors)} ${n.gpus.length > 0 ? html`<div class="gpu-grid">${n.gpus.map((g) => gpuCard(n, g))}</div>` : ''}
  </article>`;
}

export function renderNodes(nodes: StatusNode[], actors: StatusActor[]): Html {
  if (nodes.length === 0)
    return html`<p class="empty-note">No node has joined yet. Start one with <code>troupe agent --head ws://…</code>.</p>`;
  const order = { ALIVE: 0, SUSPECT: 1, DEAD: 2 } as const;
  const sorted = [...nodes].sort((a, b) => order[a.state] - order[b.state] || a.name.localeCompare(b.name));
  return html`${sorted.map((n) => nodeCard(n, actors))}`;
}
