import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { TroupeError } from '../../runtime/internal.js';
import type { GrpcContext } from './context.js';
import { modelHandlers } from './model-handlers.js';
import { connectionInjector, grpcServer, inferenceImplementation, unaryMethod } from './service.js';
import { tolerantDecoding } from './malformed.js';
import { inferenceServiceDefinition } from './service-definition.js';

/**
 * The head's gRPC endpoint: the Open Inference Protocol's GRPCInferenceService (proto/), on its
 * own port beside the HTTP API (`--grpc-port`, default 8471), on the same host, under the same
 * rules: the token, the request size limit, drain, and errors with their TROUPE_ERR_* codes.
 *
 * The head accepts the port's connections itself and offers each to `handOff` (a front-door
 * worker, which serves its inferences as it serves HTTP ones: head/front-door/worker-grpc.ts);
 * a connection no worker takes is served here. Workers relay the methods that describe the server
 * and its models to the head over a loopback port of the same service (`relayPort`).
 */

export const DEFAULT_GRPC_PORT = 8471;

export interface GrpcEndpoint {
  /** host:port the service listens on. */
  readonly address: string;
  readonly port: number;
  /** A loopback port where the head serves the same service itself (no hand-off): front-door workers relay to it. */
  readonly relayPort: number;
  /** Stops taking calls; calls still open after `graceMs` are cancelled. */
  close(graceMs: number): Promise<void>;
}

/** Hands a connection just accepted (nothing read of it) to another process; false if none takes it. */
export type GrpcHandOff = (socket: Socket) => boolean;

function hostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject).listen(port, host, () => {
      server.removeListener('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}

/** The head's own answers to every method but the inferences: each the same as its HTTP route. */
function describingMethods(ctx: GrpcContext): UntypedServiceImplementation {
  const methods: UntypedServiceImplementation = {};
  for (const [method, answer] of Object.entries(modelHandlers(ctx))) methods[method] = unaryMethod(ctx, method, 'read', answer);
  return methods;
}

export async function startGrpcEndpoint(
  ctx: GrpcContext,
  port: number,
  handOff: GrpcHandOff = () => false,
  /** Whether a new connection fits under the head's connection cap (connection-cap.ts); one that does not is closed. */
  admit: (socket: Socket) => boolean = () => true,
): Promise<GrpcEndpoint> {
  const server = grpcServer(ctx.maxBodyBytes);
  server.addService(tolerantDecoding(inferenceServiceDefinition()), inferenceImplementation(ctx, describingMethods(ctx)));
  const serveHere = connectionInjector(server, ctx.tls);
  // Paused: a connection handed to a worker keeps its first bytes in the kernel, where they travel with it.
  const listener = createServer({ pauseOnConnect: true }, (socket) => {
    // A client that resets the connection before it is handed on must not take the head down.
    socket.on('error', () => socket.destroy());
    if (!admit(socket)) return void socket.destroy();
    if (!handOff(socket)) serveHere(socket);
  });
  const relay = createServer({ pauseOnConnect: true }, serveHere);
  const wanted = hostPort(ctx.host, port);
  let bound: number;
  try {
    bound = await listen(listener, ctx.host, port);
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `cannot serve gRPC on ${wanted}: ${(err as Error).message} (see --grpc-port)`);
  }
  const relayPort = await listen(relay, '127.0.0.1', 0);
  return {
    address: hostPort(ctx.host, bound),
    port: bound,
    relayPort,
    async close(graceMs) {
      listener.close();
      relay.close();
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
