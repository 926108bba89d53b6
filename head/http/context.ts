import type { Logger } from '../../runtime/internal.js';
import type { ActorCalls } from '../calls/actor-calls.js';
import type { Controller } from '../control/controller.js';
import type { Deployments } from '../control/deployments.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { GraphStreams } from '../graph/graph-streams.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { JobOptions, JobStore } from './jobs.js';
import type { ModelStore } from './model-store.js';
import type { ApiDocs } from './openapi.js';
import type { BodyBudget } from './body-budget.js';
import type { BodyThread } from './body-thread.js';

export const DEFAULT_MAX_BODY_BYTES = 64 * 2 ** 20;
export const DEFAULT_MAX_MODEL_BYTES = 1024 * 2 ** 20;

/** What `registerHttpApi` needs from the head. */
export interface HttpApiOptions {
  /** The OpenAPI document every route is declared in (the head's, shared with its other routes). */
  docs: ApiDocs;
  state: ClusterState;
  controller: Controller;
  /** Runs of deployments and graphs (async jobs run through it). */
  graphs: RunGateway;
  /** Deploys and deletes models, fns and graphs: the same service the SDK's frames use. */
  deployments: Deployments;
  /** Method calls on class actors: the same service the SDK's frames use. */
  actors: ActorCalls;
  /** Runs read as streams (the generate endpoints): the same service as the SDK's `cluster.stream`. */
  graphStreams: GraphStreams;
  log: Logger;
  /** The address the head listens on: inference needs the token only beyond loopback. */
  host: string;
  token: string | undefined;
  /** Uploaded models live under `<dataDir>/models`. */
  dataDir: string;
  /** Largest request body (inference, deployments); 413 beyond it. */
  maxBodyBytes: number;
  /** How long a server-sent event stream's connection may take nothing before the stream is cancelled (sse.ts). */
  streamIdleMs?: number | undefined;
  /** Largest model upload. */
  maxModelBytes: number;
  /** Whether the head is draining: it is then not ready (head/control/readiness.ts). */
  draining: () => boolean;
  /** Async jobs: retention, bounds and concurrency (defaults in jobs.ts). */
  jobOptions?: Partial<JobOptions>;
}

/** What every route group gets. */
export interface ApiContext extends HttpApiOptions {
  store: ModelStore;
  jobs: JobStore;
  /** The one thread that parses large request bodies off the event loop (jobs, generate requests). */
  bodies: BodyThread;
  /** The bytes of large bodies read at once, over every route (body-budget.ts). */
  bodyBudget: BodyBudget;
}
