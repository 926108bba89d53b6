import { Metadata, credentials, loadPackageDefinition, status } from '@grpc/grpc-js';
import type {
  CallOptions,
  ChannelCredentials,
  Client,
  ClientDuplexStream,
  GrpcObject,
  ServiceClientConstructor,
  ServiceError,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

/**
 * A gRPC client of the inference service built by @grpc/grpc-js from the repository's .proto files
 * (dist/proto), independent of the head's own code: what a user's generated client does.
 */

export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

const inference = loadPackageDefinition(
  loadSync('grpc_service.proto', { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_DIR] }),
).inference as GrpcObject;
const Service = inference.GRPCInferenceService as ServiceClientConstructor;

export interface GrpcClient {
  client: Client;
  /** A unary call; rejects with the ServiceError. */
  call<T = Record<string, unknown>>(method: string, request: unknown, options?: { token?: string; deadlineMs?: number }): Promise<T>;
  stream(token?: string): ClientDuplexStream<unknown, Record<string, unknown>>;
  close(): void;
}

function metadataOf(token: string | undefined): Metadata {
  const metadata = new Metadata();
  if (token) metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}

/** `channel`: how the client connects (default plaintext; `credentials.createSsl(ca)` for a head with TLS). */
export function grpcClient(
  address: string,
  maxMessageBytes = 256 * 2 ** 20,
  channel: ChannelCredentials = credentials.createInsecure(),
): GrpcClient {
  const client = new Service(address, channel, {
    'grpc.max_receive_message_length': maxMessageBytes,
    'grpc.max_send_message_length': maxMessageBytes,
  });
  const methods = client as unknown as Record<
    string,
    (request: unknown, metadata: Metadata, options: CallOptions, done: (err: ServiceError | null, response: unknown) => void) => void
  >;
  return {
    client,
    call: <T>(method: string, request: unknown, options: { token?: string; deadlineMs?: number } = {}) =>
      new Promise<T>((resolve, reject) => {
        const callOptions: CallOptions = options.deadlineMs !== undefined ? { deadline: Date.now() + options.deadlineMs } : {};
        methods[method]!.call(client, request, metadataOf(options.token), callOptions, (err, response) =>
          err ? reject(err) : resolve(response as T),
        );
      }),
    stream: (token) =>
      (
        client as unknown as { ModelStreamInfer(metadata: Metadata): ClientDuplexStream<unknown, Record<string, unknown>> }
      ).ModelStreamInfer(metadataOf(token)),
    close: () => client.close(),
  };
}

/** Asserts a call failed with `code` and a message that starts with the TROUPE_ERR_* code and matches `message`. */
export async function assertStatus(call: Promise<unknown>, code: status, troupeCode: string, message: RegExp): Promise<void> {
  await assert.rejects(call, (err: ServiceError) => {
    assert.equal(err.code, code, `status ${status[err.code]}: ${err.details}`);
    assert.ok(err.details.startsWith(`${troupeCode}: `), err.details);
    assert.match(err.details, message);
    return true;
  });
}

/** A float32 tensor's bytes, as raw_input_contents carries them. */
export function rawFloats(x: Float32Array): Buffer {
  return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
}

/** Float32 values of raw output bytes (copied: a slice of a message need not be aligned). */
export function floatsOfRaw(bytes: Uint8Array): Float32Array {
  return new Float32Array(new Uint8Array(bytes).buffer);
}
