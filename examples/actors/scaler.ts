/**
 * A class actor whose methods are graph steps (docs/actors.md): tensors in, tensors out, typed by
 * `static signatures`, with state (rows seen) that persists across runs. `troupe up` offers it as
 * module `actors/scaler.js`; its shapes fit troupe up's `mlp` (float32 [N,64] -> logits [N,10]).
 */
import { tensor } from '../../runtime/index.js';
import type { Tensor } from '../../runtime/index.js';

export class Scaler {
  static signatures = {
    scale: { inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }], outputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }] },
    argmax: {
      inputs: [{ name: 'logits', dtype: 'float32', shape: ['N', 10] }],
      outputs: [{ name: 'label', dtype: 'int64', shape: ['N'] }],
    },
  };
  readonly #factor: number;
  #rows = 0;

  constructor(factor: number) {
    this.#factor = factor;
  }

  scale({ x }: Record<string, Tensor>): Record<string, Tensor> {
    this.#rows += x!.shape[0]!;
    return {
      x: tensor(
        'float32',
        x!.shape,
        (x!.data as Float32Array).map((v) => v * this.#factor),
      ),
    };
  }

  /** Each row's class: the index of its largest logit. */
  argmax({ logits }: Record<string, Tensor>): Record<string, Tensor> {
    const [rows, classes] = logits!.shape as [number, number];
    const data = logits!.data as Float32Array;
    const label = new BigInt64Array(rows);
    for (let r = 0; r < rows; r++) {
      let best = 0;
      for (let c = 1; c < classes; c++) if (data[r * classes + c]! > data[r * classes + best]!) best = c;
      label[r] = BigInt(best);
    }
    return { label: tensor('int64', [rows], label) };
  }

  rowsSeen(): number {
    return this.#rows;
  }
}
