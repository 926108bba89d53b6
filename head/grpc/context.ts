import type { InferExchangeOptions, TlsIdentity } from '../../runtime/internal.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { ClusterState } from '../state/cluster-state.js';

/**
 * What serving inferences over gRPC needs, in the head or in a front-door worker: what the HTTP
 * inference path is given (the backend that runs deployments and graphs, the drain gate, the token
 * and the host it binds, the largest body, as the largest request message), and where each call's
 * outcome is counted (the head's metrics; a worker reports its counts to the head).
 */
export interface GrpcInferContext extends InferExchangeOptions {
  count(method: string, outcome: string): void;
}

/** What the head's own gRPC service needs besides: the cluster state and graphs for the model routes. */
export interface GrpcContext extends GrpcInferContext {
  state: ClusterState;
  graphs: RunGateway;
  /** Serve TLS (the head's certificate) instead of plaintext HTTP/2. */
  tls?: TlsIdentity;
}
