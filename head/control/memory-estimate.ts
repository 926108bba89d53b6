import { statSync } from 'node:fs';
import { join } from 'node:path';
import { parseModelRef } from '../../runtime/model-ref.js';
import type { ModelDeployment } from '../../runtime/internal.js';
import type { ActorRecord, DeploymentRecord } from '../state/records.js';

/**
 * What one actor process holds before its model: Node, onnxruntime and their buffers (the
 * resident size of an idle MLP actor, rounded up).
 */
export const BASE_ACTOR_MEMORY_BYTES = 100 * 2 ** 20;
/** A model is read into memory, then onnxruntime builds its own copy of the weights: about twice its file. */
export const MODEL_MEMORY_FACTOR = 2;

/**
 * Host memory each replica reserves on its node. A spec's own `memory` wins; without one the
 * reservation is estimated (base + twice the model file where the head knows its size), so that
 * replicas that would not fit a node's memory stay PENDING with the reason instead of starting.
 */
export function reservedMemoryBytes(spec: ModelDeployment, modelBytes: number | undefined): number {
  if (spec.memory !== undefined) return spec.memory;
  return BASE_ACTOR_MEMORY_BYTES + MODEL_MEMORY_FACTOR * (modelBytes ?? 0);
}

/**
 * The size of a model the head holds: an upload (`head:<name>@sha256:<hex>`) is a blob under
 * `<dataDir>/models/blobs` (http/model-store.ts). A path under an agent's --model-dir is on the
 * agent's disk, which the head cannot see: undefined, and such replicas reserve the base alone.
 */
export function headModelBytes(dataDir: string): (model: string) => number | undefined {
  return (model) => {
    const ref = parseModelRef(model);
    if (!ref) return undefined;
    try {
      return statSync(join(dataDir, 'models', 'blobs', `${ref.sha256}.onnx`)).size;
    } catch {
      return undefined;
    }
  };
}

/**
 * The reservation each deployment's replicas make: the spec's `memory`, or the estimate from the
 * model's size, known at once for uploads (`headBytes`) and, for a path on an agent's disk, once
 * one replica reported its file's size (remembered per model across updates).
 */
export class MemoryReservations {
  readonly #headBytes: ((model: string) => number | undefined) | undefined;
  readonly #reported = new Map<string, number>();

  constructor(headBytes?: (model: string) => number | undefined) {
    this.#headBytes = headBytes;
  }

  reserve(spec: ModelDeployment): number {
    return reservedMemoryBytes(spec, spec.kind === 'fn' ? undefined : (this.#headBytes?.(spec.model) ?? this.#reported.get(spec.model)));
  }

  /** A replica of `d` said its model file's size: it, and later replicas, reserve the estimate from then on. */
  reported(d: DeploymentRecord, a: ActorRecord, modelBytes: number | undefined): void {
    if (d.spec.memory !== undefined || modelBytes === undefined || d.spec.kind === 'fn') return;
    this.#reported.set(d.spec.model, modelBytes);
    d.memoryReserved = Math.max(d.memoryReserved, reservedMemoryBytes(d.spec, modelBytes));
    a.memoryBytes = Math.max(a.memoryBytes, d.memoryReserved);
  }
}
