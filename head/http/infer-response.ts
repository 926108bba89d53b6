import { TroupeError } from '../../runtime/index.js';
import { parseJson } from './body.js';
import type { InferenceBackend, Params } from './infer-backend.js';
import { splitInferBody } from './oip-binary.js';
import { checkInferJson } from './oip-json-scan.js';
import { InferRequestSchema, decodeInferRequest, encodeInferResponse } from './oip-codec.js';
import type { EncodedResponse } from './oip-codec.js';

/**
 * One inference request, from the model named in the URL, the Inference-Header-Content-Length
 * header and the body, to the response; throws TroupeError. Shared by the fastify route, the fast
 * path that serves the same URLs ahead of fastify (fast-infer.ts) and the front-door workers.
 */
export async function inferResponse(backend: InferenceBackend, params: Params, headerLength: string | string[] | undefined, body: Buffer): Promise<EncodedResponse> {
  const target = await backend.target(params);
  const { json, binary } = splitInferBody(body, headerLength);
  checkInferJson(json, target);
  const parsed = InferRequestSchema.safeParse(parseJson(json.toString('utf8'), 'the inference request'));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the inference request is invalid at '${issue.path.map(String).join('.') || '(root)'}': ${issue.message}`);
  }
  const decoded = decodeInferRequest(parsed.data, binary);
  const outputs = await backend.run({
    deployment: target.name,
    inputs: decoded.inputs,
    ...(decoded.outputs ? { outputs: decoded.outputs } : {}),
    ...(decoded.timeoutMs !== undefined ? { timeoutMs: decoded.timeoutMs } : {}),
  });
  const declared = target.metadata?.outputs.map((o) => o.name) ?? [];
  const order = decoded.outputs ?? [...declared.filter((n) => n in outputs), ...Object.keys(outputs).filter((n) => !declared.includes(n))];
  return encodeInferResponse(target.name, parsed.data, outputs, order);
}
