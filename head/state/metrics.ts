import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CallResult } from '../../runtime/internal.js';
import { headLoopDelay } from './event-loop.js';
import { registerMultiplexMetrics } from './multiplex-metrics.js';
import { registerVersionMetrics } from './version-metrics.js';
import type { ClusterRecords, DeploymentRecord, ProcessUsage } from './records.js';

type ModelHistograms = [Histogram.Internal<'model'>, Histogram.Internal<'model'>, Histogram.Internal<'model'>, Histogram.Internal<'model'>];

/** prom-client default metrics that are gauges with a counter's suffix. */
const DEFAULT_GAUGES_NAMED_TOTAL = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Placement is pure computation over the head's records: tens of microseconds to (at worst) a second. */
// Fine around the 5 ms a placement may take at 3,000 nodes (issue 27), so a p99 read from the buckets says how far below it is.
const PLACEMENT_BUCKETS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
  1,
];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/** Each live agent and actor process with its last reported usage, labelled by node, role and actor. */
function eachProcess(
  state: ClusterRecords,
  visit: (labels: { node: string; role: string; actor: string }, usage: ProcessUsage) => void,
): void {
  for (const n of state.nodes.values()) if (n.usage && n.state !== 'DEAD') visit({ node: n.name, role: 'agent', actor: '' }, n.usage);
  for (const a of state.actors.values())
    if (a.usage && a.state !== 'DEAD') visit({ node: state.nodeName(a.nodeId) ?? '', role: 'actor', actor: a.name }, a.usage);
}

/**
 * Prometheus metrics of the whole cluster, served by the head at /metrics, clean under
 * `promtool check metrics`: counters end in `_total`, nothing else does. Names follow Triton's
 * where one exists, and count what Triton's count: `troupe_inference_count_total` rows (Triton's
 * nv_inference_count), over `troupe_inference_exec_count_total` model executions, is the mean
 * batch size; `troupe_inference_request_success_total` counts requests. Counters the head does not
 * see per event (executions, actor states, GPUs, agent and actor processes) are read from cluster
 * state at scrape time.
 */
export class HeadMetrics {
  readonly registry = new Registry();
  readonly #request: Histogram<'model'>;
  readonly #queue: Histogram<'model'>;
  readonly #compute: Histogram<'model'>;
  readonly #batch: Histogram<'model'>;
  readonly #children = new Map<string, ModelHistograms>();
  /** Inference requests the head's front-door workers answered (they report them in bulk). */
  readonly frontDoorRequests: Counter<'model' | 'outcome'>;
  /** gRPC calls the head answered (head/grpc/), by method and outcome; their inferences count in the per-model series too. */
  readonly grpcRequests: Counter<'method' | 'outcome'>;
  /** Client connections handed to a replica that serves them itself (--http-handoff). */
  readonly handoffs: Counter<'model' | 'actor'>;
  /** How long the scheduler took to place one actor (or to find it fits nowhere). */
  readonly placement: Histogram;
  /** Actors' links to the head open now: over a connection of their own, or relayed by their agent. */
  readonly actorLinks: Gauge<'via'>;
  /** The connections the head counts against --max-connections, and of those the ones still waiting for a whole request head off its event loop (set once it listens). */
  connectionCounts: () => { open: number; waiting: number } = () => ({ open: 0, waiting: 0 });

  constructor(state: ClusterRecords) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'troupe_head_' });
    // prom-client's totals of active handles, requests and resources are gauges named `_total`,
    // which promtool rejects; the same numbers are the sum of the series by type it keeps.
    for (const name of DEFAULT_GAUGES_NAMED_TOTAL) this.registry.removeSingleMetric(`troupe_head_${name}`);
    registerMultiplexMetrics(state, this.registry);
    registerVersionMetrics(state, this.registry);
    this.#request = new Histogram({
      name: 'troupe_request_duration_seconds',
      help: 'Inference request time seen by the head, from arrival to answer.',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#queue = new Histogram({
      name: 'troupe_queue_duration_seconds',
      help: 'Time a request waited for a run: in the head queue plus in the actor queue.',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#compute = new Histogram({
      name: 'troupe_compute_duration_seconds',
      help: 'Duration of the model run (session.run) that served the request.',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#batch = new Histogram({
      name: 'troupe_request_batch_size',
      help: 'Calls in the batch each request was run in.',
      labelNames: ['model'],
      buckets: BATCH_BUCKETS,
      registers,
    });

    this.placement = new Histogram({
      name: 'troupe_placement_duration_seconds',
      help: 'Time the scheduler took to choose a node and GPUs for one PENDING actor, or to find that none fits.',
      buckets: PLACEMENT_BUCKETS,
      registers,
    });
    this.actorLinks = new Gauge({
      name: 'troupe_actor_links',
      help: "Actors' links to the head open now, by way: a connection of their own (connection) or relayed by their node's agent (agent).",
      labelNames: ['via'],
      registers,
    });
    this.handoffs = new Counter({
      name: 'troupe_http_handoffs_total',
      help: 'Client connections the head handed to a replica on its host, which served their inference requests itself (--http-handoff).',
      labelNames: ['model', 'actor'],
      registers,
    });
    this.grpcRequests = new Counter({
      name: 'troupe_grpc_requests_total',
      help: 'gRPC calls (and ModelStreamInfer requests) the head answered, by method and outcome (ok or the error code).',
      labelNames: ['method', 'outcome'],
      registers,
    });
    this.frontDoorRequests = new Counter({
      name: 'troupe_front_door_requests_total',
      help: "Inference requests answered by the head's front-door worker processes, by outcome (ok or the error code).",
      labelNames: ['model', 'outcome'],
      registers,
    });

    const deployments = () => [...state.deployments.values()];
    /** A counter per deployment, read from its record at scrape time. */
    const perDeployment = (name: string, help: string, value: (d: DeploymentRecord) => number) =>
      new Counter({
        name,
        help,
        labelNames: ['model'],
        registers,
        collect() {
          this.reset();
          for (const d of deployments()) this.inc({ model: d.spec.name }, value(d));
        },
      });
    const counts = () => this.connectionCounts();
    new Gauge({
      name: 'troupe_head_connections',
      help: "Client connections counted against the head's --max-connections (open: its own, its workers' and replicas', and those accepted that have not sent a whole request head; waiting: those last, held off the head's event loop).",
      labelNames: ['state'],
      registers,
      collect() {
        const { open, waiting } = counts();
        this.set({ state: 'open' }, open);
        this.set({ state: 'waiting' }, waiting);
      },
    });
    headLoopDelay(); // start measuring now, not at the first scrape
    new Gauge({
      name: 'troupe_head_event_loop_delay_seconds',
      help: "How late the head's event loop ran, over the last 10 s window: p50, p99 and max.",
      labelNames: ['stat'],
      registers,
      collect() {
        const d = headLoopDelay();
        this.set({ stat: 'p50' }, d.p50Ms / 1000);
        this.set({ stat: 'p99' }, d.p99Ms / 1000);
        this.set({ stat: 'max' }, d.maxMs / 1000);
      },
    });
    perDeployment(
      'troupe_inference_request_success_total',
      'Successful inference requests (each counts once, whatever its rows).',
      (d) => d.stats.ok,
    );
    perDeployment(
      'troupe_inference_count_total',
      "Inferences run, in rows as Triton's nv_inference_count counts them: a request of 64 rows to a batching deployment counts 64, a request to one that does not batch counts 1.",
      (d) => d.stats.rows,
    );
    perDeployment('troupe_inference_exec_count_total', 'Model executions (batches) run by the actors.', (d) => d.stats.execCount);
    new Counter({
      name: 'troupe_inference_request_failure_total',
      help: 'Failed inference requests by error code.',
      labelNames: ['model', 'code'],
      registers,
      collect() {
        this.reset();
        for (const d of deployments()) for (const [code, n] of d.stats.failed) this.inc({ model: d.spec.name, code }, n);
      },
    });
    new Gauge({
      name: 'troupe_queue_length',
      help: 'Requests waiting in the head for a replica with room.',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const d of deployments()) this.set({ model: d.spec.name }, d.dispatcher.queued);
      },
    });
    new Gauge({
      name: 'troupe_actors',
      help: 'Actors by deployment and state.',
      labelNames: ['model', 'state'],
      registers,
      collect() {
        this.reset();
        for (const d of deployments()) for (const a of d.actors) this.inc({ model: d.spec.name, state: a.state });
      },
    });
    new Counter({
      name: 'troupe_actor_restarts_total',
      help: 'Restarts of each actor since it was created.',
      labelNames: ['model', 'actor'],
      registers,
      collect() {
        this.reset();
        for (const d of deployments()) for (const a of d.actors) this.inc({ model: d.spec.name, actor: a.name }, a.restarts);
      },
    });
    new Gauge({
      name: 'troupe_gpu_utilization_ratio',
      help: 'GPU utilisation (0-1) from nvidia-smi.',
      labelNames: ['node', 'gpu', 'uuid'],
      registers,
      collect() {
        this.reset();
        for (const n of state.nodes.values())
          for (const g of n.resources.gpus)
            if (g.utilizationPct !== null && !g.simulated)
              this.set({ node: n.name, gpu: String(g.index), uuid: g.uuid }, g.utilizationPct / 100);
      },
    });
    new Gauge({
      name: 'troupe_gpu_memory_used_bytes',
      help: 'GPU memory in use from nvidia-smi.',
      labelNames: ['node', 'gpu', 'uuid'],
      registers,
      collect() {
        this.reset();
        for (const n of state.nodes.values())
          for (const g of n.resources.gpus)
            if (g.memoryUsedMiB !== null && !g.simulated)
              this.set({ node: n.name, gpu: String(g.index), uuid: g.uuid }, g.memoryUsedMiB * 2 ** 20);
      },
    });
    new Gauge({
      name: 'troupe_gpu_memory_total_bytes',
      help: 'GPU memory per device (simulated ones included, labelled).',
      labelNames: ['node', 'gpu', 'simulated'],
      registers,
      collect() {
        this.reset();
        for (const n of state.nodes.values())
          for (const g of n.resources.gpus)
            this.set({ node: n.name, gpu: String(g.index), simulated: String(g.simulated) }, g.memoryTotalMiB * 2 ** 20);
      },
    });
    new Gauge({
      name: 'troupe_process_resident_memory_bytes',
      help: 'RSS of agent and actor processes, from agent heartbeats.',
      labelNames: ['node', 'role', 'actor'],
      registers,
      collect() {
        this.reset();
        eachProcess(state, (labels, usage) => this.set(labels, usage.rssBytes));
      },
    });
    // A counter of each process's own CPU time: a restarted process starts again from zero, which
    // Prometheus' rate() reads as a counter reset.
    new Counter({
      name: 'troupe_process_cpu_seconds_total',
      help: 'CPU time of agent and actor processes, from agent heartbeats.',
      labelNames: ['node', 'role', 'actor'],
      registers,
      collect() {
        this.reset();
        eachProcess(state, (labels, usage) => this.inc(labels, usage.cpuSeconds));
      },
    });
  }

  /** One answered request: its total time, and where the actor says its time went. */
  observe(model: string, seconds: number, result: CallResult): void {
    // Labelled children are cached: prom-client hashes the label set on every labelled observe.
    let h = this.#children.get(model);
    if (!h) {
      h = [this.#request, this.#queue, this.#compute, this.#batch].map((m) => m.labels({ model })) as ModelHistograms;
      this.#children.set(model, h);
    }
    h[0].observe(seconds);
    if (!result.timing) return;
    h[1].observe((result.headQueueMs + result.timing.queueMs) / 1000);
    h[2].observe(result.timing.computeMs / 1000);
    h[3].observe(result.timing.batchCalls);
  }

  /** Drops a removed deployment's series. */
  forget(model: string): void {
    this.#children.delete(model);
    for (const m of [this.#request, this.#queue, this.#compute, this.#batch]) m.remove({ model });
  }
}
