import { z } from 'zod';
import { TroupeError } from '../errors.js';
import type { TensorInfo } from '../protocol/common.js';
import type { WireTensorMap } from '../tensor/wire.js';
import { oipDtype } from './datatypes.js';
import { jsonTextOfWire, wireFromJson } from './json.js';
import { MAX_JSON_VALUES } from './json-scan.js';

/**
 * The inference protocol's generate extension (Triton's `generate` / `generate_stream`): a flat
 * JSON object whose members are named inputs (a JSON value each: a scalar, or nested arrays),
 * beside an optional `id` and `parameters`; each answer is a flat object of `model_name`,
 * `model_version`, `id` when given, and each output by name (a scalar when it holds one element,
 * else its elements flat, row-major). docs/http-api.md has the examples.
 */

/** Named inputs one generate request may carry. */
export const MAX_GENERATE_INPUTS = 256;
/** Dimensions one input's nested arrays may have. */
const MAX_DIMS = 16;

export const GenerateRequestSchema = z
  .object({
    /** Echoed in every answer. */
    id: z.string().max(256).optional(),
    /** Request parameters: a class actor's `generate` gets them as its second argument. */
    parameters: z.record(z.string().max(256), z.unknown()).optional(),
  })
  .catchall(z.unknown())
  .refine((body) => Object.keys(body).length <= MAX_GENERATE_INPUTS + 2, `at most ${MAX_GENERATE_INPUTS} named inputs`);
export type GenerateRequest = z.infer<typeof GenerateRequestSchema>;

/** One answer of a generate request (its outputs are members of their own). */
export const GenerateResponseSchema = z
  .object({ model_name: z.string(), model_version: z.string(), id: z.string().optional() })
  .catchall(z.unknown());

/** The request's named inputs as JSON values (every member but `id` and `parameters`). */
export function generateValues(body: GenerateRequest): Record<string, unknown> {
  const { id: _id, parameters: _parameters, ...inputs } = body;
  return inputs;
}

/** The shape of a JSON value: [1] for a scalar, else the lengths of its nested arrays (first elements down). */
function shapeOf(value: unknown, label: string): number[] {
  if (!Array.isArray(value)) return [1];
  const shape: number[] = [];
  let at: unknown = value;
  while (Array.isArray(at)) {
    if (shape.length === MAX_DIMS) throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: nested deeper than ${MAX_DIMS} arrays`);
    shape.push(at.length);
    at = at[0];
  }
  return shape;
}

/**
 * The request's inputs as tensors of the types `infos` declare (a model's metadata, a graph's
 * signature). An input given with fewer dimensions than declared gets leading 1s (a batch of
 * one: `"x": [0.1, …]` for a ['N', 64] input is one row); the run checks the rest as any run does.
 */
export function generateInputs(body: GenerateRequest, infos: readonly TensorInfo[], target: string): WireTensorMap {
  const out: WireTensorMap = {};
  let elements = 0;
  for (const [name, value] of Object.entries(generateValues(body))) {
    const info = infos.find((i) => i.name === name);
    if (!info)
      throw new TroupeError(
        'TROUPE_ERR_BAD_INPUT',
        `'${target}' has no input '${name}' (its inputs: ${infos.map((i) => `'${i.name}'`).join(', ') || 'none'})`,
      );
    const label = `input '${name}'`;
    let shape = shapeOf(value, label);
    if (shape.length < info.shape.length) shape = [...Array<number>(info.shape.length - shape.length).fill(1), ...shape];
    elements += shape.reduce((a, b) => a * b, 1);
    if (elements > MAX_JSON_VALUES)
      throw new TroupeError('TROUPE_ERR_TOO_MANY_ELEMENTS', `the generate request holds more than ${MAX_JSON_VALUES} values`);
    const data = Array.isArray(value) ? value : [value];
    out[name] = wireFromJson(oipDtype(info.dtype as Parameters<typeof oipDtype>[0], label), shape, data, label);
  }
  return out;
}

/** The JSON text of one answer: its outputs by name, a one-element output as a scalar. Built as text so 64-bit integers keep every digit. */
export function generateResponseText(outputs: WireTensorMap, model: string, id: string | undefined, version = '1'): string {
  const parts = [`"model_name":${JSON.stringify(model)}`, `"model_version":${JSON.stringify(version)}`];
  if (id !== undefined) parts.push(`"id":${JSON.stringify(id)}`);
  for (const [name, wire] of Object.entries(outputs)) {
    const text = jsonTextOfWire(wire, `output '${name}'`);
    const one = wire.shape.reduce((a, b) => a * b, 1) === 1;
    parts.push(`${JSON.stringify(name)}:${one ? text.slice(1, -1) : text}`);
  }
  return `{${parts.join(',')}}`;
}
