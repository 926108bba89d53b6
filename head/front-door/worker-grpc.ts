import { Client, Metadata, credentials, status } from '@grpc/grpc-js';
import type { ServiceDefinition, ServiceError, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Socket } from 'node:net';
import type { InferExchangeOptions } from '../../runtime/internal.js';
import { tolerantDecoding } from '../grpc/malformed.js';
import { connectionInjector, grpcServer, inferenceImplementation } from '../grpc/service.js';
import type { UnaryHandler } from '../grpc/service.js';
import { SERVICE_NAME, inferenceServiceDefinition } from '../grpc/service-definition.js';
import { serviceError } from '../grpc/status.js';

/**
 * A front-door worker's share of the gRPC endpoint: a grpc-js server with no port of its own, into
 * which the connections the head accepted on the gRPC port are injected. It serves ModelInfer and
 * ModelStreamInfer as the head would, through the worker's SDK connection, so their decoding,
 * checks and encoding leave the head's event loop as HTTP's do. The methods that describe the
 * server and its models need the head's state: their request bytes are relayed to the head's own
 * service on loopback and its answer (or status) passed back as it came.
 */

export interface WorkerGrpcOptions extends InferExchangeOptions {
  /** The head's loopback port serving the same service. */
  relayPort: number;
}

export interface WorkerGrpc {
  /** Serves a connection the head handed over. */
  inject(socket: Socket): void;
  /** The calls answered since the last take, by method and outcome. */
  takeCounts(): { method: string; outcome: string; count: number }[];
}

const INFERENCES = new Set(['ModelInfer', 'ModelStreamInfer']);
const asBytes = (bytes: Buffer): Buffer => bytes;

/** The service with the relayed methods' messages left as the bytes they came as. */
function workerDefinition(): ServiceDefinition {
  const methods = Object.entries(tolerantDecoding(inferenceServiceDefinition())).map(([name, method]) =>
    INFERENCES.has(name)
      ? ([name, method] as const)
      : ([name, { ...method, requestDeserialize: asBytes, responseSerialize: asBytes }] as const),
  );
  return Object.fromEntries(methods) as ServiceDefinition;
}

export function startWorkerGrpc(options: WorkerGrpcOptions): WorkerGrpc {
  const counts = new Map<string, { method: string; outcome: string; count: number }>();
  const count = (method: string, outcome: string) => {
    const key = `${method} ${outcome}`;
    const entry = counts.get(key);
    if (entry) entry.count++;
    else counts.set(key, { method, outcome, count: 1 });
  };
  const head = new Client(`127.0.0.1:${options.relayPort}`, credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
  const relay =
    (method: string): UnaryHandler =>
    (call, callback) => {
      // The token is the only metadata the head reads of these calls.
      const metadata = new Metadata();
      for (const value of call.metadata.get('authorization')) metadata.add('authorization', value);
      const relayed = head.makeUnaryRequest(
        `/${SERVICE_NAME}/${method}`,
        asBytes,
        asBytes,
        call.request as Buffer,
        metadata,
        { deadline: call.getDeadline() },
        (err: ServiceError | null, answer?: Buffer) => {
          if (!err) return callback(null, answer);
          // The head's own refusals pass as they came; a relay that failed on its way is said as such.
          if (err.details.startsWith('TROUPE_ERR_')) return callback(err);
          if (err.code === status.DEADLINE_EXCEEDED)
            return callback(
              serviceError({ status: 504, code: 'TROUPE_ERR_DEADLINE_EXCEEDED', message: `${method} ran past the call's deadline` }),
            );
          callback(
            serviceError({
              status: 503,
              code: 'TROUPE_ERR_CONNECTION_CLOSED',
              message: `the head did not answer ${method} relayed by its front-door worker: ${err.details}`,
            }),
          );
        },
      );
      call.once('cancelled', () => relayed.cancel());
    };
  const definition = workerDefinition();
  const describing: UntypedServiceImplementation = {};
  for (const method of Object.keys(definition)) if (!INFERENCES.has(method)) describing[method] = relay(method);
  const server = grpcServer(options.maxBodyBytes);
  server.addService(definition, inferenceImplementation({ ...options, count }, describing));
  const inject = connectionInjector(server);
  return {
    inject,
    takeCounts() {
      const taken = [...counts.values()];
      counts.clear();
      return taken;
    },
  };
}
