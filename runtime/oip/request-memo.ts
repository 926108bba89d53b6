import { TroupeError } from '../errors.js';
import { parseJson } from '../http/parse-json.js';
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
/** Distinct headers kept per target; past it the oldest is forgotten. */
export const MEMO_ENTRIES = 256;

interface Checked {
  /** What the checks read of the target besides its metadata (the scope): a hit needs the same. */
  name: string;
  takesAnything: boolean;
  request: InferRequest;
}

/** Per target signature: a deployment's metadata object (stable while it is the same model), else the target itself. */
const memos = new WeakMap<object, Map<string, Checked>>();

/**
 * The inference request in `json` (the body's JSON part), checked against `target` as
 * {@link parseInferRequest} checks it; a byte-identical header already checked for the same target
 * gives back the same frozen request object.
 */
export function checkedInferRequest(json: Buffer, target: InferTarget): InferRequest {
  // Inline "data" changes with every request: such headers are never worth a look-up.
  if (json.length > MEMO_MAX_HEADER_BYTES || json.indexOf('"data"') >= 0) return parseInferRequest(json, target);
  // latin1 maps each byte to one character: equal keys are equal bytes, and it is the cheapest decoding.
  const key = json.toString('latin1');
  const scope = target.metadata ?? target;
  const anything = takesAnything(target);
  const memo = memos.get(scope);
  const hit = memo?.get(key);
  if (hit && hit.name === target.name && hit.takesAnything === anything) return hit.request;
  const request = parseInferRequest(json, target);
  // An escaped key can still spell "data": the parsed request says for sure.
  if (request.inputs.some((input) => input.data !== undefined)) return request;
  const kept = memo ?? new Map<string, Checked>();
  if (!memo) memos.set(scope, kept);
  if (kept.size >= MEMO_ENTRIES && !kept.has(key)) kept.delete(kept.keys().next().value!);
  kept.set(key, { name: target.name, takesAnything: anything, request: deepFreeze(request) });
  return request;
}

/** The request in `json`, checked in full: the scan before JSON.parse (json-scan.ts), then the schema. */
export function parseInferRequest(json: Buffer, target: InferTarget): InferRequest {
  checkInferJson(json, target);
  const parsed = InferRequestSchema.safeParse(parseJson(json.toString('utf8'), 'the inference request'));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `the inference request is invalid at '${issue.path.map(String).join('.') || '(root)'}': ${issue.message}`,
    );
  }
  return parsed.data;
}

/** A request shared by every call that sends its header: no call may change it for the next. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
