import assert from 'node:assert/strict';
import { binaryBody } from './http.js';

/** Float32 values of a binary answer's bytes (copied first: a slice of a body need not be 4-byte aligned). */
export function floatsOf(bytes: Uint8Array): Float32Array {
  return new Float32Array(new Uint8Array(bytes).buffer);
}

/** Each value within 1e-5 of onnxruntime's, naming the first that is not. */
export function assertClose(actual: ArrayLike<number>, wanted: ArrayLike<number>, what: string): void {
  assert.equal(actual.length, wanted.length, `${what}: length`);
  for (let i = 0; i < wanted.length; i++)
    assert.ok(Math.abs(actual[i]! - wanted[i]!) < 1e-5, `${what}: element ${i} is ${actual[i]}, onnxruntime says ${wanted[i]}`);
}

/** The example MLP's inference request with the binary tensor extension: `rows` rows of `x`, logits back as bytes. */
export function mlpBinaryRequest(x: Float32Array, rows: number): { body: Buffer; headers: Record<string, string> } {
  return binaryBody(
    {
      inputs: [{ name: 'x', shape: [rows, 64], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } }],
      outputs: [{ name: 'logits', parameters: { binary_data: true } }],
    },
    [new Uint8Array(x.buffer, x.byteOffset, x.byteLength)],
  );
}
