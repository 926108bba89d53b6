import { MIN_POOLED_BYTES, bytesOf, viewBytes } from '../runtime/internal.js';
import type { BufferPool, NumericDType, Tensor, TypedArray } from '../runtime/internal.js';
import type { MovedTensor } from './inference-thread-messages.js';

/**
 * Tensors moved between an actor's threads without copies where the buffers allow it (see
 * {@link MovedTensor}). A buffer can be moved (transferred) only when nothing else lives in it:
 * the inputs of a call are views of the frame or shared-memory slot they came in, so they are
 * copied once into a buffer of their own; outputs onnxruntime allocated are moved as they are.
 */

/** A buffer holding `bytes` at offset 0 that nothing else uses: pooled when large, else a fresh one. */
function ownBuffer(bytes: number, pool: BufferPool): Uint8Array {
  // Below the pool's smallest class it hands out slices of Node's shared slab, which must never move.
  return bytes >= MIN_POOLED_BYTES ? pool.take(bytes) : new Uint8Array(bytes);
}

/** Copies each input into a buffer of its own and lists those buffers for the transfer. */
export function moveInputs(
  inputs: Record<string, Tensor>,
  pool: BufferPool,
): { moved: Record<string, MovedTensor>; transfer: ArrayBuffer[] } {
  const moved: Record<string, MovedTensor> = {};
  const transfer: ArrayBuffer[] = [];
  for (const [name, t] of Object.entries(inputs)) {
    if (t.dtype === 'string') {
      moved[name] = { dtype: t.dtype, shape: [...t.shape], data: t.data as string[], byteLength: 0 };
      continue;
    }
    const bytes = bytesOf(t.data as TypedArray);
    const own = ownBuffer(bytes.byteLength, pool);
    own.set(bytes);
    moved[name] = { dtype: t.dtype, shape: [...t.shape], data: own.buffer as ArrayBuffer, byteLength: bytes.byteLength };
    transfer.push(own.buffer as ArrayBuffer);
  }
  return { moved, transfer };
}

/**
 * Outputs as moved tensors. An output whose bytes do not start its buffer, or share it with an
 * input or an earlier output (a model may hand an input back as it is), is copied: a transfer
 * detaches the whole buffer, and the same buffer may be listed only once.
 */
export function moveOutputs(
  outputs: Record<string, Tensor>,
  inputBuffers: ReadonlySet<ArrayBufferLike>,
): { moved: Record<string, MovedTensor>; transfer: ArrayBuffer[] } {
  const moved: Record<string, MovedTensor> = {};
  const transfer: ArrayBuffer[] = [];
  for (const [name, t] of Object.entries(outputs)) {
    if (t.dtype === 'string') {
      moved[name] = { dtype: t.dtype, shape: [...t.shape], data: t.data as string[], byteLength: 0 };
      continue;
    }
    let bytes = bytesOf(t.data as TypedArray);
    const movable =
      bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && !inputBuffers.has(bytes.buffer) && !transfer.includes(bytes.buffer);
    if (!movable) bytes = bytes.slice();
    moved[name] = { dtype: t.dtype, shape: [...t.shape], data: bytes.buffer as ArrayBuffer, byteLength: bytes.byteLength };
    transfer.push(bytes.buffer as ArrayBuffer);
  }
  return { moved, transfer };
}

/** Moved tensors as the typed arrays the rest of the actor works with (views, no copies). */
export function tensorsOf(moved: Record<string, MovedTensor>): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [name, m] of Object.entries(moved)) {
    out[name] =
      m.dtype === 'string'
        ? { dtype: m.dtype, shape: m.shape, data: m.data as string[] }
        : {
            dtype: m.dtype,
            shape: m.shape,
            data: viewBytes(m.dtype as NumericDType, new Uint8Array(m.data as ArrayBuffer, 0, m.byteLength)),
          };
  }
  return out;
}
