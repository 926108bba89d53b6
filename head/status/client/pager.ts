import { html } from './html.js';
import type { Html } from './html.js';

/** "51–100 of 3,000" with previous and next buttons; `data-page` on a button says where it goes. */
export function renderPager(what: string, offset: number, shown: number, total: number, limit: number): Html {
  const first = total === 0 ? 0 : offset + 1;
  const last = offset + shown;
  const prev = Math.max(0, offset - limit);
  const next = offset + limit;
  return html`<span class="pager-text" data-offset="${offset}" data-total="${total}"
      >${first.toLocaleString('en-US')}–${last.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} ${what}</span
    >
    <button type="button" class="pager-button" data-page="${prev}" ${offset === 0 ? 'disabled' : ''} aria-label="previous page">‹</button>
    <button type="button" class="pager-button" data-page="${next}" ${next >= total ? 'disabled' : ''} aria-label="next page">›</button>`;
}

/** Calls `go` with the offset of the pager button clicked inside `host`. */
export function onPage(host: HTMLElement, go: (offset: number) => void): void {
  host.addEventListener('click', (e) => {
    const button = (e.target as Element).closest<HTMLButtonElement>('button[data-page]');
    if (button && !button.disabled) go(Number(button.dataset.page));
  });
}
