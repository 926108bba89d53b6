import { loadPackageDefinition } from '@grpc/grpc-js';
import type { GrpcObject, ServiceDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { Options } from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import { decodeModelInferRequest } from './infer-request-codec.js';
import { encodeModelInferResponse, encodeModelStreamInferResponse } from './infer-response-codec.js';

/**
 * The service the head serves, read from the repository's own .proto files (proto/, copied beside
 * the compiled code by the build), so the server and every client generated from those files agree.
 */

/** proto/ as the build lays it out: dist/proto beside dist/head. */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

/**
 * How messages look to the handlers: field names as the .proto writes them (snake_case, as
 * Triton's JSON and clients do); 64-bit integers as decimal strings, so INT64 contents keep every
 * digit; enums by name; unset fields at their defaults; a oneof names its chosen field.
 */
export const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

export const SERVICE_NAME = 'inference.GRPCInferenceService';

/**
 * The service as the .proto describes it, ModelInfer's and ModelStreamInfer's messages excepted:
 * those go through the service's own codec (infer-request-codec.ts, infer-response-codec.ts),
 * which gives the same objects without reflection and leaves tensor bytes where they arrived.
 */
export function inferenceServiceDefinition(): ServiceDefinition {
  const inference = loadPackageDefinition(loadSync('grpc_service.proto', LOADER_OPTIONS)).inference as GrpcObject;
  const service = (inference.GRPCInferenceService as unknown as { service: ServiceDefinition }).service;
  const codecs = {
    ModelInfer: { requestDeserialize: decodeModelInferRequest, responseSerialize: encodeModelInferResponse },
    ModelStreamInfer: { requestDeserialize: decodeModelInferRequest, responseSerialize: encodeModelStreamInferResponse },
  };
  return Object.fromEntries(
    Object.entries(service).map(([name, method]) => [name, { ...method, ...(codecs[name as keyof typeof codecs] ?? {}) }]),
  ) as ServiceDefinition;
}
