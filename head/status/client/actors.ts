import { badge, fmtAgo, fmtBytes, fmtShare, html } from './html.js';
import type { Html } from './html.js';
import type { StatusActor } from './protocol.js';

type Column =
  'name' | 'deployment' | 'state' | 'node' | 'device' | 'pid' | 'restarts' | 'queued' | 'inFlight' | 'calls' | 'stateBytes' | 'lastError';

/** States that need a look first when sorting by state. */
const STATE_ORDER: Record<StatusActor['state'], number> = { DEAD: 0, RESTARTING: 1, PENDING: 2, STARTING: 3, DRAINING: 4, READY: 5 };

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

function sortValue(a: StatusActor, key: Column): string | number {
  switch (key) {
    case 'state':
      return STATE_ORDER[a.state];
    case 'lastError':
      return a.lastError?.time ?? 0;
    case 'pid':
      return a.pid ?? -1;
    case 'node':
      return a.node ?? '';
    case 'stateBytes':
      return a.stateBytes ?? -1;
    default:
      return a[key];
  }
}

/** The device, with the share of it when the actor holds a fraction of a GPU. */
function device(a: StatusActor): string {
  return a.gpus.length > 0 && a.gpuShare < 1 ? `${a.device} ×${fmtShare(a.gpuShare)}` : a.device;
}

/** Text a filter matches against: what the row shows. */
function haystack(a: StatusActor): string {
  return [a.name, a.deployment, a.state, a.reason ?? '', a.node ?? '', device(a), a.pid ?? '', a.lastError?.message ?? '']
    .join(' ')
    .toLowerCase();
}

/** The actors table: click a header to sort (again to reverse); filter by text and by state. */
export class ActorsTable {
  #sort: Column = 'deployment';
  #descending = false;
  #text = '';
  #state = 'all';

  constructor(table: HTMLElement, filter: HTMLInputElement, state: HTMLSelectElement, onChange: () => void) {
    table.addEventListener('click', (e) => {
      const th = (e.target as Element).closest<HTMLElement>('th[data-sort]');
      if (!th) return;
      const key = th.dataset.sort as Column;
      this.#descending = this.#sort === key ? !this.#descending : false;
      this.#sort = key;
      onChange();
    });
    filter.addEventListener('input', () => {
      this.#text = filter.value.trim().toLowerCase();
      onChange();
    });
    state.addEventListener('change', () => {
      this.#state = state.value;
      onChange();
    });
  }

  render(actors: StatusActor[], now: number): Html {
    const shown = actors.filter((a) => {
      if (this.#state === 'problems' ? a.state === 'READY' : this.#state !== 'all' && a.state !== this.#state) return false;
      return this.#text === '' || haystack(a).includes(this.#text);
    });
    const dir = this.#descending ? -1 : 1;
    shown.sort((a, b) => {
      const x = sortValue(a, this.#sort);
      const y = sortValue(b, this.#sort);
      const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), 'en', { numeric: true });
      return c * dir || a.name.localeCompare(b.name, 'en', { numeric: true });
    });
    const head = COLUMNS.map((c) => {
      const active = c.key === this.#sort;
      const arrow = active ? (this.#descending ? ' ▼' : ' ▲') : '';
      return html`<th
        data-sort="${c.key}"
        class="sortable${c.numeric ? ' num' : ''}${active ? ' sorted' : ''}"
        title="${c.title ?? `sort by ${c.label.toLowerCase()}`}"
        aria-sort="${active ? (this.#descending ? 'descending' : 'ascending') : 'none'}"
      >
        ${c.label}${arrow}
      </th>`;
    });
    const rows = shown.map(
      (a) =>
        html`<tr data-actor="${a.name}" data-actor-id="${a.id}" data-state="${a.state}" data-pid="${a.pid ?? ''}">
          <td><strong>${a.name}</strong></td>
          <td>${a.deployment}</td>
          <td class="state-cell">
            ${badge(a.state)}${a.reason && a.state !== 'READY' ? html`<div class="reason" title="${a.reason}">${a.reason.split('\n')[0]}</div>` : ''}
          </td>
          <td>${a.node ?? '–'}</td>
          <td class="mono small">${device(a)}</td>
          <td class="num mono">${a.pid ?? '–'}</td>
          <td class="num${a.restarts > 0 ? ' warn' : ''}">${a.restarts}</td>
          <td class="num">${a.queued}</td>
          <td class="num">${a.inFlight}</td>
          <td class="num">
            ${a.calls.toLocaleString('en-US')}${a.models ? html`<div class="muted small" title="loaded now: ${a.models.loaded.join(', ') || 'none'}">${a.models.loaded.length} models · ${hitPercent(a.models)} hits</div>` : ''}
          </td>
          <td class="num">${a.stateBytes === null ? html`<span class="muted">–</span>` : fmtBytes(a.stateBytes)}</td>
          <td class="last-error">
            ${a.lastError ? html`<span class="muted small">${fmtAgo(a.lastError.time, now)}</span> <span class="reason" title="${a.lastError.message}">${a.lastError.message.split('\n')[0]}</span>` : html`<span class="muted">–</span>`}
          </td>
        </tr>`,
    );
    const empty = actors.length === 0 ? 'No actors yet.' : 'No actor matches the filter.';
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
      </table>
      <div class="muted small table-foot">${shown.length} of ${actors.length} actor${actors.length === 1 ? '' : 's'}</div>`;
  }
}

/** A multiplexed replica's share of calls that found their model loaded. */
function hitPercent(models: { hits: number; misses: number }): string {
  const calls = models.hits + models.misses;
  return calls === 0 ? '–' : `${Math.round((100 * models.hits) / calls)}%`;
}
