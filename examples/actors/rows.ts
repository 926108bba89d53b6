/**
 * A streaming graph step (docs/actors.md, "Streams through a pipeline"): `rows` is an async
 * generator that yields its input's rows one at a time, each going on to the next step as it
 * comes. `troupe up` offers it as module `actors/rows.js`; its shapes fit troupe up's `mlp`
 * (float32 [N,64] -> logits [N,10]).
 */
import { tensor } from '../../runtime/index.js';
import type { Tensor } from '../../runtime/index.js';

export class Rows {
  static signatures = {
    rows: { inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }], outputs: [{ name: 'x', dtype: 'float32', shape: [1, 64] }] },
  };

  async *rows({ x }: Record<string, Tensor>): AsyncGenerator<Record<string, Tensor>> {
    const data = x!.data as Float32Array;
    for (let r = 0; r < x!.shape[0]!; r++) yield { x: tensor('float32', [1, 64], data.slice(r * 64, (r + 1) * 64)) };
  }
}
