import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Metadata, ServerDuplexStream, ServerUnaryCall, UntypedServiceImplementation, sendUnaryData } from '@grpc/grpc-js';
import { TroupeError } from '../../runtime/internal.js';
import type { AuthPolicy, HttpError } from '../../runtime/internal.js';
import { grpcAuthError } from './auth.js';
import type { GrpcContext } from './context.js';
import { accepted, inferOnce, serveStream } from './infer-handlers.js';
import { checkDecoded, tolerantDecoding } from './malformed.js';
import { modelHandlers } from './model-handlers.js';
import { inferenceServiceDefinition } from './service-definition.js';
import { failure, serviceError } from './status.js';

/**
 * The head's gRPC endpoint: the Open Inference Protocol's GRPCInferenceService (proto/), on its
 * own port beside the HTTP API (`--grpc-port`, default 8471), on the same host, under the same
 * rules: the token, the request size limit, drain, and errors with their TROUPE_ERR_* codes.
 */

export const DEFAULT_GRPC_PORT = 8471;

export interface GrpcEndpoint {
  /** host:port the service listens on. */
  readonly address: string;
  readonly port: number;
  /** Stops taking calls; calls still open after `graceMs` are cancelled. */
  close(graceMs: number): Promise<void>;
}

function hostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export async function startGrpcEndpoint(ctx: GrpcContext, port: number): Promise<GrpcEndpoint> {
  const server = new Server({
    // The HTTP API's body limit: larger messages are refused (RESOURCE_EXHAUSTED) before they are decoded.
    'grpc.max_receive_message_length': ctx.maxBodyBytes,
    'grpc.max_send_message_length': -1,
  });
  const counted = (method: string) => (outcome: string) => ctx.state.metrics.grpcRequests.inc({ method, outcome });
  const refusal = (policy: AuthPolicy, metadata: Metadata, method: string) => grpcAuthError(policy, ctx, metadata, method);

  /** A unary method: the token its policy asks for, then the answer or the error as a status. */
  const unary =
    (method: string, policy: AuthPolicy, answer: (request: unknown, call: ServerUnaryCall<unknown, unknown>) => unknown) =>
    (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const count = counted(method);
      const fail = (error: HttpError) => {
        count(error.code);
        callback(serviceError(error));
      };
      const refused = refusal(policy, call.metadata, method);
      if (refused) return fail(refused);
      Promise.resolve()
        .then(() => {
          checkDecoded(call.request);
          return answer(call.request, call);
        })
        .then(
          (response) => {
            count('ok');
            callback(null, response);
          },
          (err: unknown) => fail(failure(ctx.log, err, method, ctx.maxBodyBytes)),
        );
    };

  const implementation: UntypedServiceImplementation = {};
  for (const [method, answer] of Object.entries(modelHandlers(ctx))) implementation[method] = unary(method, 'read', answer);
  const modelInfer = unary('ModelInfer', 'inference', (request, call) => inferOnce(ctx, request, call.getDeadline()));
  implementation.ModelInfer = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
    const entry = accepted(ctx, 'ModelInfer');
    if ('refused' in entry) {
      counted('ModelInfer')(entry.refused.code);
      return callback(serviceError(entry.refused));
    }
    let left = false;
    const leave = () => {
      if (!left) entry.leave();
      left = true;
    };
    // Left when answered, or when the client gave up on the call.
    call.once('cancelled', leave);
    modelInfer(call, (error, response) => {
      leave();
      callback(error, response);
    });
  };
  implementation.ModelStreamInfer = (call: ServerDuplexStream<unknown, unknown>) => {
    const refused = refusal('inference', call.metadata, 'ModelStreamInfer');
    if (refused) {
      counted('ModelStreamInfer')(refused.code);
      call.emit('error', serviceError(refused));
      return;
    }
    serveStream(ctx, call, counted('ModelStreamInfer'));
  };
  server.addService(tolerantDecoding(inferenceServiceDefinition()), implementation);

  const wanted = hostPort(ctx.host, port);
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(wanted, ServerCredentials.createInsecure(), (err, at) =>
      err
        ? reject(new TroupeError('TROUPE_ERR_BAD_FLAG', `cannot serve gRPC on ${wanted}: ${err.message} (see --grpc-port)`))
        : resolve(at),
    ),
  );
  return {
    address: hostPort(ctx.host, bound),
    port: bound,
    async close(graceMs) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs))),
      ]);
      clearTimeout(timer);
      server.forceShutdown();
    },
  };
}
