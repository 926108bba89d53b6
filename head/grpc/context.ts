import type { InferExchangeOptions } from '../../runtime/internal.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { ClusterState } from '../state/cluster-state.js';

/**
 * What the gRPC service needs from the head: what the HTTP inference path is given (the backend
 * that runs deployments and graphs, the drain gate, the token and the host it binds, the largest
 * body, as the largest request message), and the cluster state and graphs for the model routes.
 */
export interface GrpcContext extends InferExchangeOptions {
  state: ClusterState;
  graphs: RunGateway;
}
