import type { Metadata } from '@grpc/grpc-js';
import { authError } from '../../runtime/internal.js';
import type { AuthPolicy, HttpError } from '../../runtime/internal.js';

/**
 * The HTTP API's token rules (runtime/http/auth.ts) for a gRPC call: the cluster token comes as
 * the metadata entry `authorization: Bearer <token>`. Health and metadata are `read` (open);
 * ModelInfer and ModelStreamInfer are `inference` (the token when the head listens beyond loopback).
 */
export function grpcAuthError(
  policy: AuthPolicy,
  options: { token: string | undefined; host: string },
  metadata: Metadata,
  method: string,
): HttpError | undefined {
  const [value] = metadata.get('authorization');
  const authorization = typeof value === 'string' ? value : undefined;
  return authError(policy, options.token, options.host, { method: 'gRPC', headers: { authorization } }, method);
}
