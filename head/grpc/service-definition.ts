import { loadPackageDefinition } from '@grpc/grpc-js';
import type { GrpcObject, ServiceDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { Options } from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

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

export function inferenceServiceDefinition(): ServiceDefinition {
  const inference = loadPackageDefinition(loadSync('grpc_service.proto', LOADER_OPTIONS)).inference as GrpcObject;
  return (inference.GRPCInferenceService as unknown as { service: ServiceDefinition }).service;
}
