/** The options of the SDK's Cluster: connecting, running, deploying (cluster.ts). */
import type { Tensor } from '../tensor/tensor.js';
import type { TlsClientOptions } from '../transport/tls.js';
import type { Future, FutureOutput } from './future.js';

/** A run's inputs: tensors, Futures of earlier runs (or one output of one), or Futures of actor calls whose value is a tensor. */
export type RunInputs = Record<string, Tensor | Future | FutureOutput>;

export interface ConnectOptions {
  /**
   * The cluster token (default: TROUPE_TOKEN). Required when the head listens beyond loopback; on
   * loopback a client without it may run inference and futures and describe, not deploy, undeploy
   * or call class actors' methods (TROUPE_ERR_UNAUTHORIZED).
   */
  token?: string;
  /**
   * For an `https:`/`wss:` URL: the CA that signed the head's certificate (`ca`, PEM; default: the
   * file TROUPE_TLS_CA names, else Node's roots). Nothing then crosses in clear: the head's
   * connection is a verified WebSocket over TLS with no plaintext fallback, and direct runs go to
   * replicas over TLS only (each presents the head's certificate, checked against the head's host
   * name); a replica that offers only plain TCP is not called, its runs go through the head.
   * `cert`/`key` present a client certificate (a head started with `--tls-agent-ca` asks agents for one).
   */
  tls?: TlsClientOptions;
  /** Give up connecting after this long (default 10 s). */
  connectTimeoutMs?: number;
  /**
   * Retries of a run, deploy or describe that fails with a retryable error (`err.retryable`:
   * the connection dropped, the head restarted or drains, a replica died, a queue was full),
   * backing off from 50 ms to 1 s and waiting for the connection to come back. Default 0: the
   * error reaches the caller. Inference is idempotent, so a retried run is safe.
   */
  retries?: number;
  /** Reconnect (with back-off) when the connection drops (default true). */
  reconnect?: boolean;
  /**
   * Send runs of model deployments straight to their replicas (default true): two process hops
   * instead of four, and the head never touches the tensors. The head still says where the
   * replicas are and with which limits; graphs, fns, traced runs and runs taking futures of runs
   * the head holds go through the head. false: every run goes through the head (for a client
   * that can reach the head but not the nodes, e.g. across NAT).
   */
  direct?: boolean;
  /**
   * With direct runs, put inputs of 64 KiB and more in shared memory that replicas on this host
   * read in place, instead of sending them through their sockets (default true; figures in
   * bench/RESULTS-shared-memory.md). Needs the addon `npm run
   * build` compiles where a C compiler is found (Linux); without it, or for replicas on other
   * hosts, tensors go in frames. false, or TROUPE_SHARED_MEMORY=0, turns it off.
   */
  sharedMemory?: boolean;
  /** The most bytes of shared memory this client maps for inputs in flight (default 512 MiB); past it, inputs go in frames. */
  sharedMemoryBytes?: number;
}

/** This client's shared memory for inputs (see {@link ConnectOptions.sharedMemory}). */
export interface SharedMemoryStats {
  /** Why inputs never go through shared memory from this client, if they do not. */
  off?: string;
  /** Regions made so far, their bytes together, and inputs placed in them. */
  regions: number;
  bytes: number;
  tensors: number;
}

export interface RunOptions {
  /** Fail with TROUPE_ERR_DEADLINE_EXCEEDED if no answer comes within this time. */
  timeoutMs?: number;
  /** Return only these outputs. */
  outputs?: string[];
  /** Record per-step timings; read them with `future.trace()`. */
  trace?: boolean;
  /** Retries of this run on a retryable error (default: the connection's `retries`); all within `timeoutMs`. */
  retries?: number;
  /** Which model of a multiplexed deployment's set runs the call (its file name without `.onnx`). */
  model?: string;
}

export interface DeployOptions {
  /**
   * How long the head waits for every replica to be READY (default 60 s, at most 1 h). Past it the
   * call rejects with TROUPE_ERR_DEPLOY_TIMEOUT naming each actor not READY and why (PENDING: what
   * the scheduler could not find); the deployment stays and the head keeps placing it.
   */
  timeoutMs?: number;
  /** false: return at once, with actors as they are (e.g. PENDING with a reason). Default true. */
  wait?: boolean;
  /**
   * true: replace a READY deployment of the same name whose spec differs (a graph's models
   * likewise). Without it such a deploy is refused with TROUPE_ERR_DEPLOYMENT_EXISTS saying what
   * differs, so a deploy never silently swaps out something that is serving. {@link Cluster.update}
   * sets it. Deploying the same spec again needs nothing: it changes nothing.
   */
  replace?: boolean;
}

export interface UndeployOptions {
  /**
   * true: delete a deployment even while deployed graphs call it (they then fail until it is
   * deployed again). Without it that is refused with TROUPE_ERR_DEPLOYMENT_IN_USE naming the graphs.
   */
  force?: boolean;
}
