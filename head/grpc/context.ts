import type { InferenceBackend, Logger, ShutdownGate } from '../../runtime/internal.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { ClusterState } from '../state/cluster-state.js';

/** What the gRPC service needs from the head: the same pieces the HTTP API serves from. */
export interface GrpcContext {
  state: ClusterState;
  graphs: RunGateway;
  /** Inference as the head's HTTP path runs it (head/http/state-backend.ts): deployments and graphs. */
  backend: InferenceBackend;
  /** Counts accepted inferences, so a drain waits for them; refuses new ones while draining. */
  gate: ShutdownGate;
  token: string | undefined;
  /** The address the head listens on: inference needs the token only beyond loopback. */
  host: string;
  /** Largest request message, as the HTTP API's largest body. */
  maxBodyBytes: number;
  log: Logger;
}
