import { z } from 'zod';
import { ClassLabelsSchema, ERROR_CODES, ModelMetadataSchema } from '../../runtime/internal.js';

/**
 * What the head and its front-door workers say over their IPC channel (advanced serialization,
 * so bytes travel as bytes). Both sides check what they receive: a worker is our own code, but a
 * message that does not parse must be dropped with a log line, not crash either process.
 */

export const InferTargetSchema = z.object({
  name: z.string(),
  kind: z.enum(['model', 'fn', 'class', 'graph']),
  metadata: ModelMetadataSchema.nullable(),
  labels: ClassLabelsSchema.optional(),
  startsOnDemand: z.boolean().optional(),
  versions: z.record(z.string(), z.string()).optional(),
  multiplexed: z.boolean().optional(),
});

export const WorkerSettingsSchema = z.object({
  /** The head's own URL, where the worker's SDK connection goes (routes, graphs, fallbacks). */
  headUrl: z.string().url(),
  token: z.string().optional(),
  host: z.string(),
  maxBodyBytes: z.number().int().positive(),
  /** A loopback port where the head serves requests relayed by a worker (no hand-off there). */
  internalPort: z.number().int().min(1).max(65_535),
  keepAliveTimeoutMs: z.number().int().min(0),
  headersTimeoutMs: z.number().int().min(0),
  /** The loopback port of the head's own gRPC service, when it serves gRPC: workers relay all but the inferences to it. */
  grpcRelayPort: z.number().int().min(1).max(65_535).optional(),
});
export type WorkerSettings = z.infer<typeof WorkerSettingsSchema>;

const headToWorkerMessages = [
  z.object({ type: z.literal('init'), settings: WorkerSettingsSchema }),
  /** Every deployment and graph the head has now; sent whenever one changes. */
  z.object({ type: z.literal('catalog'), targets: z.array(InferTargetSchema) }),
  z.object({ type: z.literal('target'), id: z.number().int(), target: InferTargetSchema.nullable() }),
  /**
   * Comes with a socket, or (`queued`) with the socket's descriptor queued on the worker's handoff
   * socket (worker-handoff.ts): a connection whose first bytes the head has read already.
   */
  z.object({ type: z.literal('connection'), head: z.instanceof(Uint8Array), queued: z.literal(true).optional() }),
  /** The head connected to the handoff socket the worker named in `ready`: take that connection (only `headPid`'s). */
  z.object({ type: z.literal('handoffOpen'), headPid: z.number().int().positive() }),
  /** Comes with a socket: a connection to the gRPC port, nothing read of it. */
  z.object({ type: z.literal('grpc-connection') }),
  z.object({ type: z.literal('drain') }),
  /**
   * The head is at its connection cap with no slow connection of its own to drop: the worker closes
   * its oldest HTTP connection that has not sent a whole request head yet, to make room.
   */
  z.object({ type: z.literal('evict') }),
] as const;
const OneHeadToWorkerSchema = z.discriminatedUnion('type', [...headToWorkerMessages]);
/** One message, as the head means it; several in a row go in one `batch` (front-door.ts). */
export type HeadToWorker = z.infer<typeof OneHeadToWorkerSchema>;

export const HeadToWorkerSchema = z.discriminatedUnion('type', [
  ...headToWorkerMessages,
  /**
   * The messages the head had for the worker in one turn of its event loop, in order, in one IPC
   * write: under a burst of new connections a write per connection (and per eviction) took much of
   * the head's time. None of them comes with a socket.
   */
  z.object({ type: z.literal('batch'), messages: z.array(OneHeadToWorkerSchema) }),
]);

export const WorkerToHeadSchema = z.discriminatedUnion('type', [
  /** `handoff`: the abstract socket address where the worker takes connections' descriptors (worker-handoff.ts). */
  z.object({ type: z.literal('ready'), handoff: z.string().min(1).max(200).optional() }),
  /** A request named a deployment the worker's catalog lacks (or knows no signature of) yet. */
  z.object({ type: z.literal('lookup'), id: z.number().int(), name: z.string().max(1024) }),
  /**
   * Requests answered since the last report, per deployment: those that succeeded, and those that
   * failed in the call by code (the actors report the successes' latencies themselves).
   */
  z.object({
    type: z.literal('report'),
    served: z.record(z.string(), z.number().int().min(0)),
    failed: z.record(z.string(), z.partialRecord(z.enum(ERROR_CODES as [string, ...string[]]), z.number().int().min(0))),
    /** Connections (HTTP and gRPC) the worker holds now, for the head's connection cap. */
    connections: z.number().int().min(0).optional(),
    /** Of those, HTTP connections that have sent no whole request head yet (slow or silent: the cap may drop them). */
    unproven: z.number().int().min(0).optional(),
    /** When the oldest of them came (ms since the epoch): the cap drops the oldest slow connection, the head's or a worker's. */
    oldestUnproven: z.number().optional(),
    /** gRPC calls answered, by method and outcome (the head's troupe_grpc_requests_total). */
    grpc: z
      .array(z.object({ method: z.string().max(64), outcome: z.string().max(64), count: z.number().int().min(1) }))
      .max(1024)
      .optional(),
  }),
  z.object({ type: z.literal('drained'), unfinished: z.number().int().min(0) }),
  /** Comes with a socket: a connection given back with the bytes read of a request the worker does not serve. */
  z.object({ type: z.literal('return'), head: z.instanceof(Uint8Array) }),
]);
export type WorkerToHead = z.infer<typeof WorkerToHeadSchema>;
