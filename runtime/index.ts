/**
 * Troupe's SDK: what `import { … } from 'troupe'` gives, and all it gives. Everything else the
 * head, agents and actors share lives behind runtime/internal.ts, which package.json's `exports`
 * keeps out of users' reach (and `npm run lint` keeps this list from growing by accident: the
 * head, agents, actors and CLI import the internal entry, and test/unit/public-api.test.ts names
 * every export below).
 */

// Connecting, deploying, running.
export { Cluster } from './client/cluster.js';
export { connect } from './client/connect.js';
export type { ConnectOptions, DeployOptions, RunInputs, UndeployOptions, RunOptions, SharedMemoryStats } from './client/cluster.js';
export type { TlsClientOptions } from './transport/tls.js';
export { Future, FutureOutput } from './client/future.js';
export type { FutureStatus, Outputs } from './client/future.js';
export { wait } from './client/wait.js';
export type { ActorContext } from './client/actor-context.js';
export type { WaitOptions, WaitResult } from './client/wait.js';

// Class actors: stateful instances of a user's class, their methods called by name.
export { ActorHandle, CallFuture } from './client/actor-handle.js';
export { ActorReference } from './protocol/value-types.js';
export type { ActorCallOptions, ActorSpec, ActorStreamOptions } from './client/actor-handle.js';
export type { ConcurrencyGroups } from './concurrency-groups.js';
export { ActorStream } from './client/actor-stream.js';
export type { StreamRunOptions } from './client/run-stream.js';

// Tensors.
export { tensor } from './tensor/tensor.js';
export type { Tensor, TensorData, TypedArray } from './tensor/tensor.js';
export type { DType } from './tensor/dtypes.js';

// Graphs: pipelines, ensembles, data-parallel steps, and fn steps' signature.
export { dataParallel, ensemble, fn, method, model, pipeline } from './graph/builder.js';
export type {
  CombineOption,
  DataParallelOptions,
  EnsembleOptions,
  FnStepOptions,
  GraphStep,
  ModelStepOptions,
  PipelineOptions,
} from './graph/builder.js';
export type { GraphDocument } from './graph/schema.js';
export type { StepFn } from './protocol/fn-actor.js';
export type { RunTrace, StepTiming } from './graph/trace.js';

// Errors: one class, stable codes.
export { ERROR_CODES, ERRORS, TroupeError } from './errors.js';
export type { ErrorCode } from './errors.js';

// What deploying takes and what the cluster says.
export type { AutoscaleSpec, BatchSpec, DeploymentLabels, ModelDeploymentInput, MultiplexSpec, VersionSpec } from './spec.js';
export type { ActorState, ActorView, ClusterView, DeploymentView, NodeState, NodeView } from './views.js';
export type { GraphDeploymentView, GraphView } from './graph/view.js';
export type { ModelMetadata, TensorInfo } from './protocol/common.js';
