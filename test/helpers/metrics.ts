import { call } from './http.js';

/** The sum of a counter's samples on the head's /metrics whose labels include `labels` (e.g. `model="mlp"`). */
export async function counter(url: string, name: string, labels: string): Promise<number> {
  const text = (await call(url, 'GET', '/metrics')).body.toString();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && l.includes(labels))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}
