import { GraphBuilder, attr } from './onnx-builder.js';

/**
 * `y[n] = sum(x[n, :])`: input `x` float32 [N, M] with both dims dynamic, output `y` float32
 * [N, 1]. Calls with different M must never share a batch, which makes it the test model for
 * batching by shape.
 */
export function buildRowSum(): Uint8Array {
  const g = new GraphBuilder('rowsum');
  g.input('x', 'float32', ['N', 'M']);
  g.initializer('axes', [1], BigInt64Array.from([1n]));
  g.node('ReduceSum', ['x', 'axes'], ['y'], { keepdims: attr.int(1) });
  g.output('y', 'float32', ['N', 1]);
  return g.toBytes();
}
