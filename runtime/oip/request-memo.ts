import { checkedBy, parseJson } from '../http/parse-json.js';
import { takesAnything } from './infer-backend.js';
import type { InferTarget } from './infer-backend.js';
import { checkInferJson } from './json-scan.js';
import { InferRequestSchema } from './codec.js';
import type { InferRequest } from './codec.js';

/**
 * A memo of checked inference request headers. A client sends the same JSON header, byte for byte,
 * with every request (only the binary tensors after it change), so the header checked once for a
 * target is taken as checked when the same bytes come again: the scan, JSON.parse and the schema's
 * parse are skipped. Only the answer of a header that passed every check is kept, so a header that
 * differs by a byte, or failed before, is checked in full and fails with the same message.
 */

/** Headers longer than this are checked every time: a client's header of a few tensors is far shorter. */
export const MEMO_MAX_HEADER_BYTES = 4096;
/** Headers kept in all (with their targets' names, at most about a MiB); past it the first kept is forgotten. */
export const MEMO_ENTRIES = 256;

interface Checked {
  /**
   * What the checks read of the target: its inputs' signature, by identity (a deployment's new
   * model brings a new one; a graph's target is made anew for each request around the same
   * signature arrays), and whether it takes anything.
   */
  inputs: object | null;
  takesAnything: boolean;
  request: InferRequest;
}

/** By the target's name and the header's bytes. */
const memo = new Map<string, Checked>();

/**
 * The inference request in `json` (the body's JSON part), checked against `target` as
 * {@link parseInferRequest} checks it; a byte-identical header already checked for the same target
 * (name and signature) gives back the same frozen request object.
 */
export function checkedInferRequest(json: Buffer, target: InferTarget): InferRequest {
  if (json.length > MEMO_MAX_HEADER_BYTES) return parseInferRequest(json, target);
  // latin1 maps each byte to one character, so equal texts are equal bytes; and it is the cheapest decoding.
  const text = json.toString('latin1');
  // Inline "data" changes with every request: such headers are never worth a look-up. (A string's
  // search is cheaper than the Buffer's, which converts its needle on every call.)
  if (text.includes('"data"')) return parseInferRequest(json, target);
  const key = `${target.name}\n${text}`;
  const inputs = target.metadata?.inputs ?? null;
  const anything = takesAnything(target);
  const hit = memo.get(key);
  if (hit && hit.inputs === inputs && hit.takesAnything === anything) return hit.request;
  const request = parseInferRequest(json, target);
  // An escaped key can still spell "data": the parsed request says for sure.
  if (request.inputs.some((input) => input.data !== undefined)) return request;
  if (memo.size >= MEMO_ENTRIES && !memo.has(key)) memo.delete(memo.keys().next().value!);
  memo.set(key, { inputs, takesAnything: anything, request: deepFreeze(request) });
  return request;
}

/** The request in `json`, checked in full: the scan before JSON.parse (json-scan.ts), then the schema. */
export function parseInferRequest(json: Buffer, target: InferTarget): InferRequest {
  checkInferJson(json, target);
  return checkedBy(InferRequestSchema, parseJson(json.toString('utf8'), 'the inference request'), 'inference request');
}

/** A request shared by every call that sends its header: no call may change it for the next. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
