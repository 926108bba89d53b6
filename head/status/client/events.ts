import { fmtClock, html } from './html.js';
import type { Html } from './html.js';
import type { StatusEvent } from './protocol.js';

/** Events the page keeps; the head keeps more, and sends the newest on connecting. */
export const EVENTS_KEPT = 300;

const LABELS: Record<string, string> = {
  'node-joined': 'node joined',
  'node-suspect': 'node suspect',
  'node-lost': 'node lost',
  'node-left': 'node left',
  'actor-ready': 'actor ready',
  'actor-rejoined': 'actor rejoined',
  'actor-adopted': 'actor adopted',
  'head-restored': 'head restored',
  'actor-crashed': 'actor crashed',
  'actor-dead': 'actor dead',
  'deployment-changed': 'deployment',
  'deployment-removed': 'undeployed',
  'deployment-refused': 'deploy refused',
  scaled: 'scaling',
};

/** The events list, newest first, optionally filtered by text. */
export function renderEvents(events: StatusEvent[], filter: string): Html {
  const needle = filter.trim().toLowerCase();
  const shown = events.filter((e) => needle === '' || `${e.kind} ${e.message}`.toLowerCase().includes(needle)).reverse();
  if (shown.length === 0)
    return html`<li class="empty-note">${events.length === 0 ? 'Nothing has happened yet.' : 'No event matches the filter.'}</li>`;
  return html`${shown.map(
    (e) =>
      html`<li class="event kind-${e.kind}" data-kind="${e.kind}">
        <time class="mono muted" datetime="${new Date(e.time).toISOString()}">${fmtClock(e.time)}</time>
        <span class="event-kind">${LABELS[e.kind] ?? e.kind}</span>
        <span class="event-message" title="${e.message}">${e.message}</span>
      </li>`,
  )}`;
}
