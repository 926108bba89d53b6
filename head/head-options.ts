/** What a head is started with, and what it gives back (server.ts startHead). */
import type { ControllerOptions } from './control/controller-options.js';
import type { LivenessOptions } from './control/liveness.js';
import type { JobOptions } from './http/jobs.js';
import type { ClusterState } from './state/cluster-state.js';
import type { Pem } from '../runtime/internal.js';

/** The head's own TLS (docs/security.md): what it presents, and whom it asks for a certificate. */
export interface HeadTlsOptions {
  /** The head's certificate (PEM; a chain, leaf first) and its private key. */
  cert: Pem;
  key: Pem;
  /**
   * Mutual TLS with agents: an agent must present a certificate this CA signed, or its connection
   * is refused (401). Other callers (SDK, HTTP, gRPC) are not asked to present one.
   */
  agentCa?: Pem;
}

export interface HeadOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Cluster token; required when `host` is not loopback. */
  token?: string;
  liveness?: Partial<LivenessOptions>;
  controller?: Partial<ControllerOptions>;
  /** Largest frame accepted (default 256 MiB); a larger one closes its connection (a WebSocket with 1009). */
  maxFrameBytes?: number;
  /**
   * Where the head keeps uploaded models and its durable state (default `.troupe/head` under the
   * working directory): deployments, graphs and the identities of running actors, in `state.json`.
   */
  dataDir?: string;
  /**
   * Keep deployments and actor identities in `<dataDir>/state.json` and restore them at start, so
   * a restarted head adopts the actors that kept running. Default: on when `dataDir` is given
   * (`troupe head` always gives one), off for an in-process head without one.
   */
  persistState?: boolean;
  /**
   * A state file that exists but cannot be read is set aside (renamed) and the head starts with no
   * deployments. Default false: such a file stops the head with TROUPE_ERR_STATE_UNREADABLE.
   */
  discardState?: boolean;
  /** On close (SIGTERM), how long accepted calls get to finish before the head exits (default 10 s). */
  drainMs?: number;
  /** Largest HTTP request body, e.g. an inference (default 64 MiB); 413 beyond it. */
  maxBodyBytes?: number;
  /** Largest model upload (default 1 GiB). */
  maxModelBytes?: number;
  /** How long a server-sent event stream's connection may take nothing before the stream is cancelled (default 60 s). */
  streamIdleMs?: number;
  /** Async jobs (`POST /api/v1/deployments/{name}/jobs`): retention, bounds, concurrency. */
  jobs?: Partial<JobOptions>;
  /**
   * Front-door worker processes that serve connections opening with an inference-protocol request
   * (`/v2/...`) beside the head, calling replicas directly (head/front-door/). Default: one per
   * core, at most 4; 0 serves every request in the head process.
   */
  httpWorkers?: number;
  /**
   * Replicas on this host serve the HTTP connections of their deployment themselves, handed over
   * by the head (head/front-door/handoff-doors.ts): no worker between client and model, balanced
   * by connection, and a replica's connections end with it. Needs front-door workers (for the
   * requests a replica does not serve) and the handoff addon. Absent (the default): only while a
   * model has one READY replica, where balancing by connection moves nothing and there is no other
   * replica to retry on; true: every replica, however many; false: none.
   */
  httpHandoff?: boolean;
  /** How long a client or agent connection may say nothing before it is closed (default 10 s). */
  firstMessageTimeoutMs?: number;
  /**
   * Open TCP connections accepted at once (default 10,000); one past it is closed as it arrives.
   * Without a cap, idle sockets took the head to its process's file-descriptor limit.
   */
  maxConnections?: number;
  /**
   * Serve the Open Inference Protocol's gRPC service on this port, on the same host (head/grpc/,
   * docs/grpc.md); 0 picks a free one. Absent: no gRPC endpoint (`troupe head` gives 8471 unless
   * told otherwise).
   */
  grpcPort?: number;
  /**
   * Answer `/healthz` and `/readyz` on a port of their own too (head/probe-server.ts), on the same
   * host, for an orchestrator's probes; 0 picks a free one. Absent: only the main port answers them.
   */
  probePort?: number;
  /**
   * Serve HTTPS and WSS on the head's port, and TLS on the gRPC port; every port then refuses
   * plaintext. Replicas' direct ports present the same certificate (handed to agents over their
   * TLS connections). Front-door workers and HTTP handoff are off under TLS (they pass raw
   * connections between processes); asking for either with it is refused (TROUPE_ERR_BAD_FLAG).
   */
  tls?: HeadTlsOptions;
}

export const DEFAULT_MAX_CONNECTIONS = 10_000;
/** How long an HTTP connection may stay silent, or take over its request head, before it is closed. */
export const SILENT_CONNECTION_MS = 10_000;
/** How long a stopping head lets accepted calls finish, unless told otherwise (--drain-ms). */
export const DEFAULT_DRAIN_MS = 10_000;

export interface Head {
  /** http://host:port (https:// under TLS); the connection endpoints (WebSocket or frame-stream upgrades) are under /v1/. */
  readonly url: string;
  /** host:port of the gRPC endpoint, when the head serves one. */
  readonly grpcAddress: string | undefined;
  /** http(s)://host:port of the probe listener (`probePort`), when there is one. */
  readonly probeUrl: string | undefined;
  readonly state: ClusterState;
  /**
   * What came back from the data directory's state file at start (deployments and graphs by
   * name, a version split's own versions left out): the CLI prints it, since a restart that
   * restores a dozen deployments nobody asked for again should say so. Undefined: nothing saved.
   */
  readonly restored: { file: string; deployments: string[]; graphs: string[] } | undefined;
  /**
   * Drains, then stops: new work is refused with TROUPE_ERR_SHUTTING_DOWN (retryable) while the
   * accepted calls finish, for at most `drainMs`; then every socket is dropped. Agents and actors
   * keep running and reconnect to the next head started on the same data directory.
   */
  close(): Promise<void>;
}
