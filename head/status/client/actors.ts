import { badge, fmtAgo, fmtBytes, fmtShare, html, plural } from './html.js';
import type { Html } from './html.js';
import { DEFAULT_ACTOR_QUERY } from './protocol.js';
import type { ActorQuery, ActorSort, StatusActor } from './protocol.js';

type Column = ActorSort;

const COLUMNS: { key: Column; label: string; numeric?: boolean; title?: string }[] = [
  { key: 'name', label: 'Actor' },
  { key: 'deployment', label: 'Deployment' },
  { key: 'state', label: 'State' },
  { key: 'node', label: 'Node' },
  { key: 'device', label: 'Device' },
  { key: 'pid', label: 'PID', numeric: true },
  { key: 'restarts', label: 'Restarts', numeric: true },
  { key: 'queued', label: 'Queue', numeric: true, title: 'calls queued inside the actor process' },
  { key: 'inFlight', label: 'In flight', numeric: true, title: 'calls sent to the actor and not answered yet' },
  { key: 'calls', label: 'Calls', numeric: true },
  { key: 'stateBytes', label: 'State', numeric: true, title: "a class actor's state size, when its class reports one (stateSize())" },
  { key: 'lastError', label: 'Last error' },
];

/** The device, with the share of it when the actor holds a fraction of a GPU. */
function device(a: StatusActor): string {
  return a.gpus.length > 0 && a.gpuShare < 1 ? `${a.device} ×${fmtShare(a.gpuShare)}` : a.device;
}

/** Rows a page of the table holds. */
export const ACTORS_PAGE = 50;

const GROUP_LABELS: Record<ActorQuery['group'], string> = { none: '', deployment: 'deployment', node: 'node', state: 'state' };

/**
 * The actors table, one page of the cluster's actors at a time: the head sorts, filters and
 * groups (the page sends the query, `query()`), the table draws the window it gets back. Click a
 * header to sort (again to reverse); filter by text, state, deployment and node; group by
 * deployment, node or state.
 */
export class ActorsTable {
  #q: ActorQuery = { ...DEFAULT_ACTOR_QUERY, limit: ACTORS_PAGE };
  readonly #onChange: () => void;

  constructor(
    table: HTMLElement,
    controls: { filter: HTMLInputElement; state: HTMLSelectElement; group: HTMLSelectElement },
    onChange: () => void,
  ) {
    this.#onChange = onChange;
    table.addEventListener('click', (e) => {
      const th = (e.target as Element).closest<HTMLElement>('th[data-sort]');
      if (!th) return;
      const key = th.dataset.sort as Column;
      this.#set({ descending: this.#q.sort === key ? !this.#q.descending : false, sort: key });
    });
    let typing: number | undefined;
    controls.filter.addEventListener('input', () => {
      // One view request per pause in typing, not one per key.
      window.clearTimeout(typing);
      typing = window.setTimeout(() => this.#set({ text: controls.filter.value.trim() }), 150);
    });
    controls.state.addEventListener('change', () => this.#set({ state: controls.state.value as ActorQuery['state'] }));
    controls.group.addEventListener('change', () => this.#set({ group: controls.group.value as ActorQuery['group'] }));
  }

  query(): ActorQuery {
    return this.#q;
  }

  /** Shows one deployment's or one node's actors ('' for all), from the first page. */
  only(filter: { deployment?: string; node?: string }): void {
    this.#set(filter);
  }

  page(offset: number): void {
    this.#q = { ...this.#q, offset };
    this.#onChange();
  }

  #set(change: Partial<ActorQuery>): void {
    this.#q = { ...this.#q, ...change, offset: 0 };
    this.#onChange();
  }

  /** Chips for the deployment and node filters, each with a button that clears it. */
  renderScope(): Html {
    const chip = (key: 'deployment' | 'node', value: string) =>
      value === ''
        ? ''
        : html`<span class="chip scope" data-scope="${key}"
            >${key} <b>${value}</b> <button type="button" data-clear="${key}" aria-label="show every ${key}">×</button></span
          >`;
    return html`${chip('deployment', this.#q.deployment)}${chip('node', this.#q.node)}`;
  }

  render(actors: StatusActor[], groups: Map<string, number>, now: number, anyActors: boolean): Html {
    const head = COLUMNS.map((c) => {
      const active = c.key === this.#q.sort;
      const arrow = active ? (this.#q.descending ? ' ▼' : ' ▲') : '';
      return html`<th
        data-sort="${c.key}"
        class="sortable${c.numeric ? ' num' : ''}${active ? ' sorted' : ''}"
        title="${c.title ?? `sort by ${c.label.toLowerCase()}`}"
        aria-sort="${active ? (this.#q.descending ? 'descending' : 'ascending') : 'none'}"
      >
        ${c.label}${arrow}
      </th>`;
    });
    const group = this.#q.group;
    const groupOf = (a: StatusActor): string => (group === 'deployment' ? a.deployment : group === 'node' ? (a.node ?? '') : a.state);
    const rows: Html[] = [];
    let current: string | undefined;
    for (const a of actors) {
      if (group !== 'none' && groupOf(a) !== current) {
        current = groupOf(a);
        const count = groups.get(current) ?? 0;
        rows.push(
          html`<tr class="group-row" data-group="${current}">
            <td colspan="${COLUMNS.length}">
              ${GROUP_LABELS[group]} <strong>${current || '(none)'}</strong> · ${count.toLocaleString('en-US')}
              actor${count === 1 ? '' : 's'}
            </td>
          </tr>`,
        );
      }
      rows.push(actorRow(a, now));
    }
    const empty = anyActors ? 'No actor matches the filter.' : 'No actors yet.';
    return html`<table class="grid-table actors">
      <thead>
        <tr>
          ${head}
        </tr>
      </thead>
      <tbody>
        ${
          rows.length > 0
            ? rows
            : html`<tr>
                <td colspan="${COLUMNS.length}" class="empty-note">${empty}</td>
              </tr>`
        }
      </tbody>
    </table>`;
  }
}

function actorRow(a: StatusActor, now: number): Html {
  return html`<tr data-actor="${a.name}" data-actor-id="${a.id}" data-state="${a.state}" data-pid="${a.pid ?? ''}">
    <td><strong>${a.name}</strong></td>
    <td>${a.deployment}</td>
    <td class="state-cell">
      ${badge(a.state)}${a.reason && a.state !== 'READY' ? html`<div class="reason" title="${a.reason}">${a.reason.split('\n')[0]}</div>` : ''}
    </td>
    <td>${a.node ?? '–'}</td>
    <td class="mono small">${device(a)}</td>
    <td class="num mono">${a.pid ?? '–'}</td>
    <td class="num${a.restarts > 0 ? ' warn' : ''}">${a.restarts}</td>
    <td class="num">
      ${a.queued}${a.groups ? html`<div class="muted small" title="concurrency groups: calls running of the limit, and waiting">${a.groups.map((g) => `${g.name} ${g.running}/${g.limit}${g.waiting > 0 ? ` +${g.waiting}` : ''}`).join(' · ')}</div>` : ''}
    </td>
    <td class="num">${a.inFlight}</td>
    <td class="num">
      ${a.calls.toLocaleString('en-US')}${a.models ? html`<div class="muted small" title="loaded now: ${a.models.loaded.join(', ') || 'none'}">${plural(a.models.loaded.length, 'model')} · ${hitPercent(a.models)} hits</div>` : ''}
    </td>
    <td class="num">${a.stateBytes === null ? html`<span class="muted">–</span>` : fmtBytes(a.stateBytes)}</td>
    <td class="last-error">
      ${a.lastError ? html`<span class="muted small">${fmtAgo(a.lastError.time, now)}</span> <span class="reason" title="${a.lastError.message}">${a.lastError.message.split('\n')[0]}</span>` : html`<span class="muted">–</span>`}
    </td>
  </tr>`;
}

/** A multiplexed replica's share of calls that found their model loaded. */
function hitPercent(models: { hits: number; misses: number }): string {
  const calls = models.hits + models.misses;
  return calls === 0 ? '–' : `${Math.round((100 * models.hits) / calls)}%`;
}
