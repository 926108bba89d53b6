import { request } from 'undici';

/**
 * Waits until every replica of `model` has taken a handed-over connection (--http-handoff): a
 * replica's door opens just after it is READY, and connections made before then stay with the
 * front-door workers for their life. Probes with fresh connections, each closed after one
 * request; bounded.
 */
export async function whenDoorsOpen(
  url: string,
  model: string,
  replicas: number,
  body: { headers: Record<string, string>; body: Buffer | string },
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const series = new RegExp(`^troupe_http_handoffs_total\\{[^}]*model="${model}"[^}]*\\} `, 'gm');
  for (;;) {
    const metrics = await (await request(`${url}/metrics`)).body.text();
    if ((metrics.match(series) ?? []).length >= replicas) return;
    if (Date.now() > deadline) throw new Error(`no handoff to all ${replicas} replicas of '${model}' within ${timeoutMs} ms`);
    const answer = await request(`${url}/v2/models/${model}/infer`, {
      method: 'POST',
      headers: { ...body.headers, connection: 'close' },
      body: body.body,
    });
    await answer.body.arrayBuffer();
  }
}
