import { MODEL_VERSION } from './infer-backend.js';
import type { InferenceBackend, InferTarget, Params } from './infer-backend.js';
import type { WireTensorMap } from '../tensor/wire.js';
import { splitInferBody } from './binary.js';
import { classCounts, classifyOutputs } from './classification.js';
import { decodeInferRequest, encodeInferResponse } from './codec.js';
import type { DecodedRequest, EncodedResponse, InferRequest } from './codec.js';
import { isRawRequest, rawInferRequest } from './raw.js';
import { checkedInferRequest } from './request-memo.js';

/**
 * One inference request, from the model named in the URL, the Inference-Header-Content-Length
 * header and the (decoded) body, to the response; throws TroupeError. Shared by the fastify route,
 * the fast path that serves the same URLs ahead of fastify (fast-infer.ts) and the front-door
 * workers. A header of 0 is Triton's raw binary request (oip-raw.ts); outputs that ask for
 * classification are replaced by their classes (oip-classification.ts) before encoding.
 */
export async function inferResponse(
  backend: InferenceBackend,
  params: Params,
  headerLength: string | string[] | undefined,
  body: Buffer,
): Promise<EncodedResponse> {
  const found = backend.target(params);
  // Most backends know their targets at once: awaiting a plain value would still cost a microtask.
  const target = found instanceof Promise ? await found : found;
  const { request, decoded } = isRawRequest(headerLength) ? rawRequest(target, body) : jsonRequest(target, headerLength, body);
  // Checked before the run: a bad class count costs no inference.
  const counts = classCounts(request);
  const { outputs, version: served } = await backend.run({
    deployment: target.name,
    inputs: decoded.inputs,
    ...(decoded.outputs ? { outputs: decoded.outputs } : {}),
    ...(decoded.timeoutMs !== undefined ? { timeoutMs: decoded.timeoutMs } : {}),
    ...(target.model !== undefined ? { model: target.model } : {}),
  });
  const { model, version } = answeredAs(target, params, served);
  return encodeInferResponse(
    model,
    request,
    classifyOutputs(outputs, counts, target.labels),
    outputOrder(target, decoded.outputs, outputs),
    version,
  );
}

/**
 * The name and version a response gives: the name the request named, as Triton answers, and the
 * version that ran it. A deployment split between versions answers the version the request pinned,
 * or else the one the split chose (`served`), so every answer says which model produced it. The
 * version that ran is said even where `target` (as a front-door worker last heard of it) names no
 * versions: a deployment made one model again is served by its versions until its own replicas
 * are READY, and a worker may hear of a split after its call ran on a version. Anything else has
 * the one version, "1".
 */
export function answeredAs(target: InferTarget, params: Params, served: string | undefined): { model: string; version: string } {
  const version = params.version ?? served ?? MODEL_VERSION;
  if (params.version !== undefined || target.versions || served !== undefined) return { model: params.name, version };
  return { model: target.model === undefined ? target.name : `${target.name}:${target.model}`, version };
}

/** The order outputs are answered in: as asked, else as the target declares them, then any others it returned. */
export function outputOrder(target: InferTarget, asked: readonly string[] | undefined, outputs: WireTensorMap): readonly string[] {
  if (asked) return asked;
  const declared = target.metadata?.outputs.map((o) => o.name) ?? [];
  return [...declared.filter((n) => n in outputs), ...Object.keys(outputs).filter((n) => !declared.includes(n))];
}

function rawRequest(target: InferTarget, body: Buffer): { request: InferRequest; decoded: DecodedRequest } {
  const { request, inputs } = rawInferRequest(target, body);
  return { request, decoded: { inputs, outputs: undefined, timeoutMs: undefined } };
}

function jsonRequest(
  target: InferTarget,
  headerLength: string | string[] | undefined,
  body: Buffer,
): { request: InferRequest; decoded: DecodedRequest } {
  const { json, binary } = splitInferBody(body, headerLength);
  const request = checkedInferRequest(json, target);
  return { request, decoded: decodeInferRequest(request, binary) };
}
