import type { ServerDuplexStream } from '@grpc/grpc-js';
import { answeredAs, classCounts, classifyOutputs, drainingError, outputOrder } from '../../runtime/internal.js';
import type { HttpError } from '../../runtime/internal.js';
import type { GrpcInferContext } from './context.js';
import { decodeGrpcRequest } from './infer-request.js';
import { grpcInferResponse } from './infer-response.js';
import { checkModelInferRequest } from './infer-request-limits.js';
import type { ModelInferResponse } from './messages.js';
import { failure, statusMessage } from './status.js';

/**
 * ModelInfer and ModelStreamInfer: a request decoded to the wire tensors the HTTP path decodes to,
 * run by the same backend (a deployment's queue, or the run gateway for a graph), answered with
 * the same classification and output order (runtime/oip/infer-response.ts).
 */

/** Milliseconds left before `deadline` (grpc-js gives Infinity for a call without one). */
function remainingMs(deadline: Date | number): number | undefined {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/** One inference, from the request message as decoded off the wire to the response message. */
export async function inferOnce(ctx: GrpcInferContext, message: unknown, deadline: Date | number): Promise<ModelInferResponse> {
  const request = checkModelInferRequest(message);
  const params = { name: request.model_name, ...(request.model_version ? { version: request.model_version } : {}) };
  const target = await ctx.backend.target(params);
  const decoded = decodeGrpcRequest(request, remainingMs(deadline));
  // Checked before the run: a bad class count costs no inference.
  const counts = classCounts(decoded.oip);
  const { outputs, version: served } = await ctx.backend.run({
    deployment: target.name,
    inputs: decoded.inputs,
    ...(decoded.outputs ? { outputs: decoded.outputs } : {}),
    ...(decoded.timeoutMs !== undefined ? { timeoutMs: decoded.timeoutMs } : {}),
    ...(target.model !== undefined ? { model: target.model } : {}),
  });
  const order = outputOrder(target, decoded.outputs, outputs);
  const { model, version } = answeredAs(target, params, served);
  return grpcInferResponse(
    model,
    request.id || undefined,
    classifyOutputs(outputs, counts, target.labels),
    order,
    decoded.rawOutputs,
    version,
  );
}

/**
 * Accepted work, counted so a drain waits for it, or the refusal of a draining head (UNAVAILABLE,
 * TROUPE_ERR_SHUTTING_DOWN, as HTTP's 503).
 */
export function accepted(ctx: GrpcInferContext, method: string): { leave: () => void } | { refused: HttpError } {
  if (ctx.gate.draining) return { refused: drainingError('gRPC', method) };
  return { leave: ctx.gate.enter() };
}

/**
 * Requests of one stream in flight at most: past it the stream is not read on (HTTP/2 flow control
 * then holds the client), so a client that writes without reading answers cannot grow the head's
 * memory without bound.
 */
export const MAX_STREAM_IN_FLIGHT = 128;

/**
 * Triton's streaming extension: each request on the stream is one inference, answered on the
 * stream as it finishes (so answers may come in another order than the requests; each carries its
 * request's id). A failed request is a response with error_message, and the stream goes on; the
 * stream ends once the client has ended its side and every answer is written.
 */
export function serveStream(ctx: GrpcInferContext, call: ServerDuplexStream<unknown, unknown>, counted: (outcome: string) => void): void {
  let pending = 0;
  let ended = false;
  // Answers not yet taken by the transport count as in flight too: a client that reads nothing stalls its stream.
  const full = () => pending + call.writableLength >= MAX_STREAM_IN_FLIGHT;
  const finish = () => {
    if (ended && pending === 0 && !call.cancelled) call.end();
    else if (call.isPaused() && !full()) call.resume();
  };
  call.on('drain', finish);
  call.on('data', (message: unknown) => {
    pending++;
    if (full()) call.pause();
    const entry = accepted(ctx, 'ModelStreamInfer');
    const work = 'refused' in entry ? Promise.reject(entry.refused) : inferOnce(ctx, message, call.getDeadline());
    const named = message as { model_name?: unknown; id?: unknown };
    work
      .then(
        (response) => {
          counted('ok');
          return { error_message: '', infer_response: response };
        },
        (err: unknown) => {
          const error = isHttpError(err) ? err : failure(ctx.log, err, 'ModelStreamInfer', ctx.maxBodyBytes);
          counted(error.code);
          const model_name = typeof named.model_name === 'string' ? named.model_name : '';
          const id = typeof named.id === 'string' ? named.id : '';
          return { error_message: statusMessage(error), infer_response: { model_name, id } };
        },
      )
      .then((answer) => {
        if (!call.cancelled) call.write(answer);
      })
      .finally(() => {
        if ('leave' in entry) entry.leave();
        pending--;
        finish();
      })
      .catch(() => undefined);
  });
  call.on('end', () => {
    ended = true;
    finish();
  });
  // A client that goes away cancels the call: the answers still owed are dropped as they come.
  call.on('error', () => undefined);
}

function isHttpError(err: unknown): err is HttpError {
  const e = err as Partial<HttpError> | null;
  return typeof e === 'object' && e !== null && typeof e.status === 'number' && typeof e.code === 'string' && !(err instanceof Error);
}
