import { html } from './html.js';
import type { Html } from './html.js';
import type { StatusDeployment } from './protocol.js';

type Version = NonNullable<StatusDeployment['versions']>[number];

/**
 * Each version's share of the calls it takes in fact: of the requests per second now, or, with no
 * traffic now, of every call so far (null before any call). Set beside the weights, it shows a
 * version that takes less than its weight (one still starting gives its share to the others).
 */
export function callShares(versions: readonly Version[]): (number | null)[] {
  const rps = versions.reduce((n, v) => n + v.rps, 0);
  const calls = versions.reduce((n, v) => n + v.calls, 0);
  return versions.map((v) => (rps > 0 ? (100 * v.rps) / rps : calls > 0 ? (100 * v.calls) / calls : null));
}

/**
 * A split deployment's versions, one line each: weight, model, replicas READY of those wanted,
 * and share of calls; and, after a promotion, the split a rollback restores.
 */
export function versionLines(d: StatusDeployment): Html {
  const versions = d.versions ?? [];
  const shares = callShares(versions);
  const lines = versions.map((v, i) => {
    const share = shares[i] ?? null;
    return html`<div class="small mono" data-version="${v.version}">
      <strong>${v.version}</strong> ${v.weight}% · ${v.model} · ${v.ready}/${v.replicas} READY ·
      ${share === null ? 'no calls yet' : `${Math.round(share)}% of calls`}
    </div>`;
  });
  const promoted = d.promotedFrom
    ? html`<div class="small muted" data-promoted>
        promoted ${versions[0]?.version ?? ''}; rollback restores ${d.promotedFrom.map((v) => `${v.version} ${v.weight}%`).join(' · ')}
      </div>`
    : '';
  return html`${lines}${promoted}`;
}
