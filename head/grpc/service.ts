import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Metadata, ServerDuplexStream, ServerUnaryCall, UntypedServiceImplementation, sendUnaryData } from '@grpc/grpc-js';
import type { Socket } from 'node:net';
import { onInjectedHttp2Sessions } from '../../runtime/internal.js';
import type { AuthPolicy, HttpError, TlsIdentity } from '../../runtime/internal.js';
import { grpcAuthError } from './auth.js';
import type { GrpcInferContext } from './context.js';
import { accepted, inferOnce, serveStream } from './infer-handlers.js';
import { checkDecoded } from './malformed.js';
import { refuseFlaggedUncompressed } from './compressed-flag.js';
import { failure, serviceError } from './status.js';

/**
 * The GRPCInferenceService's implementation, the same wherever it runs: in the head, and in each
 * front-door worker the head hands gRPC connections to. Inferences are served where the call
 * arrived (ModelInfer, ModelStreamInfer); the methods that describe the server and its models are
 * given by the caller (the head answers them from its state; a worker relays them to the head).
 */

export type UnaryHandler = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => void;

/**
 * A unary method: the token its policy asks for, then `answer`'s result or its error as a status,
 * the outcome counted.
 */
export function unaryMethod(
  ctx: GrpcInferContext,
  method: string,
  policy: AuthPolicy,
  answer: (request: unknown, call: ServerUnaryCall<unknown, unknown>) => unknown,
): UnaryHandler {
  return (call, callback) => {
    const fail = (error: HttpError) => {
      ctx.count(method, error.code);
      callback(serviceError(error));
    };
    const refused = refusal(ctx, policy, call.metadata, method);
    if (refused) return fail(refused);
    Promise.resolve()
      .then(() => {
        checkDecoded(call.request);
        return answer(call.request, call);
      })
      .then(
        (response) => {
          ctx.count(method, 'ok');
          callback(null, response);
        },
        (err: unknown) => fail(failure(ctx.log, err, method, ctx.maxBodyBytes)),
      );
  };
}

function refusal(ctx: GrpcInferContext, policy: AuthPolicy, metadata: Metadata, method: string): HttpError | undefined {
  return grpcAuthError(policy, ctx, metadata, method);
}

/** ModelInfer and ModelStreamInfer, beside `describing` (every other method of the service). */
export function inferenceImplementation(ctx: GrpcInferContext, describing: UntypedServiceImplementation): UntypedServiceImplementation {
  const modelInfer = unaryMethod(ctx, 'ModelInfer', 'inference', (request, call) => inferOnce(ctx, request, call.getDeadline()));
  const ModelInfer: UnaryHandler = (call, callback) => {
    const entry = accepted(ctx, 'ModelInfer');
    if ('refused' in entry) {
      ctx.count('ModelInfer', entry.refused.code);
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
  const ModelStreamInfer = (call: ServerDuplexStream<unknown, unknown>) => {
    const refused = refusal(ctx, 'inference', call.metadata, 'ModelStreamInfer');
    if (refused) {
      ctx.count('ModelStreamInfer', refused.code);
      call.emit('error', serviceError(refused));
      return;
    }
    serveStream(ctx, call, (outcome) => ctx.count('ModelStreamInfer', outcome));
  };
  return { ...describing, ModelInfer, ModelStreamInfer };
}

/** A server for the service that listens on no port of its own: connections are injected into it. */
export function grpcServer(maxBodyBytes: number): Server {
  refuseFlaggedUncompressed();
  return new Server({
    // The HTTP API's body limit: larger messages are refused (RESOURCE_EXHAUSTED) before they are decoded.
    'grpc.max_receive_message_length': maxBodyBytes,
    'grpc.max_send_message_length': -1,
  });
}

/**
 * HTTP/2's flow-control windows for a connection, larger than the protocol's 64 KiB default, which
 * grpc-js keeps and offers no option for: with 64 KiB for the whole connection, a client sending
 * 16 images of 588 KiB at once waited for a WINDOW_UPDATE (a wake-up of this process) every 64 KiB.
 * Unread data stays bounded by the connection's window; grpc-js reads every stream as it comes.
 */
const CONNECTION_WINDOW_BYTES = 16 * 2 ** 20;
const STREAM_WINDOW_BYTES = 4 * 2 ** 20;

/** Serves connections on `server` that another listener accepted: each injected, with wide windows, and read. */
export function connectionInjector(server: Server, tls?: TlsIdentity): (socket: Socket) => void {
  // With a certificate, grpc-js makes a TLS HTTP/2 server: a plaintext connection fails its handshake.
  const credentials = tls
    ? ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }], false)
    : ServerCredentials.createInsecure();
  const injector = server.createConnectionInjector(credentials);
  // Where grpc-js keeps its HTTP/2 servers elsewhere, connections keep the default windows (runtime/node-internals.ts).
  onInjectedHttp2Sessions(server, (session) => {
    try {
      session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
      session.settings({ initialWindowSize: STREAM_WINDOW_BYTES });
    } catch {
      // A session already closing: nothing to widen.
    }
  });
  return (socket) => {
    socket.setNoDelay(true);
    injector.injectConnection(socket);
    socket.resume();
  };
}
