// The public surface of Troupe's runtime: the SDK, and what every process shares.
// Named exports only, so what users may import is a decision made here.
export { Cluster } from './client/cluster.js';
export { connect } from './client/connect.js';
export type { ConnectOptions, DeployOptions, RunInputs, UndeployOptions, RunOptions, SharedMemoryStats } from './client/cluster.js';
export { Future, FutureOutput } from './client/future.js';
export type { FutureStatus, Outputs } from './client/future.js';
export { wait } from './client/wait.js';
export type { ActorContext } from './client/actor-context.js';
export { MAX_CALL_DEPTH, currentCallOrigin, withCallOrigin } from './client/call-origin.js';
export type { CallOrigin } from './client/call-origin.js';
export type { WaitOptions, WaitResult } from './client/wait.js';
export { ActorHandle, CallFuture } from './client/actor-handle.js';
export type { ActorTransport } from './client/actor-handle.js';
export type { ActorCallOptions, ActorSpec, ActorStreamOptions } from './client/actor-handle.js';
export { ActorStream } from './client/actor-stream.js';
export { ERRORS, ERROR_CODES, TroupeError, fromWireError, isErrorCode, toWireError } from './errors.js';
export type { ErrorCode, WireError } from './errors.js';
export { newId, newSecret } from './ids.js';
export { onParentGone } from './parent-link.js';
export { disableOrtTelemetryByDefault } from './ort-telemetry.js';
export { childNodeArgs } from './profiling.js';
export { LOG_FORMATS, createLogger } from './log.js';
export type { LogFormat, Logger } from './log.js';
export { plural } from './plural.js';
export { inspectOnnx } from './onnx-inspect.js';
export type { OnnxSummary } from './onnx-inspect.js';
export {
  ActorEnvSchema,
  ActorStatsSchema,
  ActorToHeadSchema,
  CallTimingSchema,
  CallTotalsSchema,
  MAX_BATCH_SIZES_REPORTED,
  ACTOR_ID_HEADER,
  ACTOR_SECRET_HEADER,
  ClientToReplicaSchema,
  HeadToActorReplies,
  HeadToActorSchema,
  TenantReplySchema,
  TenantStateSchema,
  ReplicaLayoutSchema,
} from './protocol/actor.js';
export type {
  ActorCall,
  ActorEnv,
  ActorStats,
  ActorToHead,
  BatchSizeTotals,
  CallTiming,
  CallTotals,
  DurationTotal,
  ClientToReplica,
  HeadToActor,
  TenantReply,
  TenantState,
  ReplicaLayout,
} from './protocol/actor.js';
export {
  AGENT_LEAVING,
  HEAD_SHUTTING_DOWN,
  AgentToHeadReplies,
  AgentToHeadSchema,
  HeadToAgentReplies,
  HeadToAgentSchema,
  MAX_RELAYED_FRAME_BYTES,
  sendRelayedFrame,
} from './protocol/agent.js';
export type { AgentToHead, HeadToAgent } from './protocol/agent.js';
export { ClientToHeadSchema, HeadToClientSchema, RunRefSchema } from './protocol/client.js';
export { RoutesSchema } from './protocol/routes.js';
export type { Routes } from './protocol/routes.js';
export type { ClientToHead, HeadToClient, RunRef } from './protocol/client.js';
export {
  ActorToAgentIpcSchema,
  ActorToRelayIpcSchema,
  AgentToActorIpcSchema,
  DirectTlsAskSchema,
  DirectTlsIpcSchema,
  RelayToActorIpcSchema,
} from './protocol/health.js';
export type { ActorToAgentIpc, ActorToRelayIpc, AgentToActorIpc, DirectTlsIpc, RelayToActorIpc } from './protocol/health.js';
export { DEFAULT_MAX_FRAME_BYTES, decodeFrame, encodeFrame, encodeFrameParts } from './protocol/codec.js';
export { MAX_VALUE_DEPTH, MAX_VALUE_ITEMS, toWireValue } from './protocol/values.js';
export { ActorReference, CallReference, MapEntries, NEGATIVE_ZERO, UserBytes, readActorReferencesWith } from './protocol/value-types.js';
export { replaceCallReferences } from './protocol/call-references.js';
export { ModelMetadataSchema, NameSchema } from './protocol/common.js';
export type { ModelMetadata, TensorInfo } from './protocol/common.js';
export {
  GpuProcessSchema,
  GpuSchema,
  MILLI_PER_UNIT,
  NodeResourcesSchema,
  defaultMaxActors,
  fromMilli,
  isMilliAmount,
  maxActorsOf,
  sumAmounts,
  toMilli,
} from './resources.js';
export type { Gpu, GpuProcess, NodeResources } from './resources.js';
export {
  AutoscaleSchema,
  BatchSchema,
  ClassArgsSchema,
  ClassLabelsSchema,
  DEFAULT_BATCH_MAX_SIZE,
  DEFAULT_IDLE_SPIN_MS,
  EVERY_OUTPUT,
  LabelListSchema,
  LabelsSchema,
  MAX_CLASS_ARGS_BYTES,
  GRAPH_MODEL_FILE,
  MAX_INSTANCES,
  MIN_REPLICA_CPUS,
  ModelDeploymentSchema,
  MultiplexSchema,
  VersionSchema,
  batchMaxSizeOf,
  batchesByDefault,
  replicasChoosable,
  classLabels,
  labelFilesOf,
} from './spec.js';
export type {
  AutoscaleSpec,
  BatchSpec,
  ClassLabels,
  DeploymentLabels,
  ModelDeployment,
  ModelDeploymentInput,
  MultiplexSpec,
  VersionSpec,
} from './spec.js';
export {
  ConcurrencyGroupNameSchema,
  ConcurrencyGroupsSchema,
  DEFAULT_CONCURRENCY_GROUP,
  GroupTableSchema,
  MAX_CONCURRENCY_GROUPS,
  groupLoads,
  groupLoadsLine,
  groupOfCall,
  groupTable,
  groupsProblem,
  unknownGroup,
} from './concurrency-groups.js';
export type { ConcurrencyGroups, GroupLoadView, GroupTable } from './concurrency-groups.js';
export { DTYPES, DTYPE_NAMES, byteLengthOf, isDType } from './tensor/dtypes.js';
export type { DType, NumericDType } from './tensor/dtypes.js';
export { bytesOf, checkShape, elementCount, formatShape, tensor, viewBytes } from './tensor/tensor.js';
export { sharesMemory } from './tensor/shares-memory.js';
export { sharedMemoryAddon } from './shm/addon.js';
export { handoffAddon } from './handoff/addon.js';
export { acceptAddon } from './handoff/accept-addon.js';
export { HandoffListener } from './handoff/handoff-listener.js';
export { fixSendBuffer } from './handoff/send-buffer.js';
export {
  NODE_INTERNALS,
  descriptorOf,
  listenerDescriptor,
  onInjectedHttp2Sessions,
  internalOff,
  moveHandle,
  responseStarted,
  socketOverDescriptor,
  stopReading,
} from './node-internals.js';
export { runInBackground } from './background-thread.js';
export type { NodeInternal } from './node-internals.js';
export type { HandoffAddon } from './handoff/addon.js';
export type { AcceptAddon, AcceptorHandle } from './handoff/accept-addon.js';
export type { SharedMemoryAddon } from './shm/addon.js';
export { MappedRegions } from './shm/mapped-regions.js';
export { DirectInputsSchema, RegionOfferSchema, SharedTensorRefSchema } from './protocol/shared-memory.js';
export type { DirectInputs, RegionOffer, SharedTensorRef } from './protocol/shared-memory.js';
export type { Tensor, TensorData, TypedArray } from './tensor/tensor.js';
export {
  checkWire,
  fromWire,
  inputViewsFromWire,
  mapFromWire,
  mapToWire,
  toWire,
  WireTensorMapSchema,
  WireTensorSchema,
} from './tensor/wire.js';
export type { WireTensor, WireTensorMap } from './tensor/wire.js';
export { Channel } from './transport/channel.js';
export { Reconnect } from './transport/reconnect.js';
export { clientSocketOptions } from './transport/socket-options.js';
export { checkBearer, sameSecret } from './transport/bearer.js';
export { BufferPool, MIN_POOLED_BYTES, sharedBufferPool } from './transport/buffer-pool.js';
export { FrameStream } from './transport/frame-stream.js';
export type { FrameSink, FrameTransport } from './transport/frame-transport.js';
export { acceptFrames, wantsFrames } from './transport/frames-upgrade.js';
export { openFrameTransport } from './transport/open-transport.js';
export { checkTlsMaterial, isSecureUrl, readPem, replicaTlsOptions } from './transport/tls.js';
export type { Pem, TlsClientOptions, TlsIdentity } from './transport/tls.js';
export { RelayedTransport } from './transport/relayed-transport.js';
export type { RelayEnd } from './transport/relayed-transport.js';
export { validateInputs } from './validate-inputs.js';
export { ACTOR_STATES, ActorViewSchema, ClusterViewSchema, DeploymentViewSchema, NODE_STATES, NodeViewSchema } from './views.js';
export type { ActorState, ActorView, ClusterView, DeploymentView, NodeState, NodeView } from './views.js';
// Graphs: the builder, the JSON form, and what the head needs to check and run them.
export { dataParallel, ensemble, fn, isGraphStep, method, model, pipeline, toGraphDocument } from './graph/builder.js';
export type {
  CombineOption,
  DataParallelOptions,
  EnsembleOptions,
  FnStepOptions,
  GraphStep,
  ModelStepOptions,
  PipelineOptions,
} from './graph/builder.js';
export {
  CombineSchema,
  DataParallelNodeSchema,
  EnsembleNodeSchema,
  FnNodeSchema,
  FnRefSchema,
  GraphDocumentSchema,
  GraphNodeSchema,
  MAX_GRAPH_NODES,
  MAX_GRAPH_STEPS,
  ModelNodeSchema,
  PipelineNodeSchema,
  WiringSchema,
  looksLikeGraphDocument,
} from './graph/schema.js';
export type {
  Combine,
  DataParallelNode,
  EnsembleNode,
  FnNode,
  GraphDocument,
  GraphNode,
  ModelNode,
  PipelineNode,
  Wiring,
} from './graph/schema.js';
export { compileGraph, countSteps, leavesOf } from './graph/compile.js';
export type {
  CompiledGraph,
  Existing,
  PlanCombine,
  PlanDataParallel,
  PlanEnsemble,
  PlanLeaf,
  PlanNode,
  PlanPipeline,
} from './graph/compile.js';
export { fits, inferSignature, inputNames, isDynamic } from './graph/signature.js';
export type { LeafInfo, Signature } from './graph/signature.js';
export { everything, sourceOf } from './graph/wiring.js';
export type { InputSource, WiringContext } from './graph/wiring.js';
export { argmax, combineOutputs, concat, groupOutputs, max, mean, vote } from './graph/combiners.js';
export type { BuiltinCombine, CombineGroup } from './graph/combiners.js';
export { batchSize, chunkBounds, concatRows, concatTensorRows, joinRows, sliceRows, splitRows } from './tensor/rows.js';
export { execute } from './graph/executor.js';
export { STEP_STREAM_WINDOW, checkStreamable, planStreams, streamPlan } from './graph/stream-executor.js';
export type { StreamOptions, StreamStepCaller } from './graph/stream-executor.js';
export { resolveModelPath } from './model-path.js';
export type { ExecuteOptions, LeafResult, StepCaller } from './graph/executor.js';
export { formatIssues } from './graph/issues.js';
export { pickReferenced, referenceFailed } from './graph/refs.js';
export { RunTraceSchema, StepTimingSchema } from './graph/trace.js';
export type { RunTrace, StepTiming } from './graph/trace.js';
export { GraphDeploymentViewSchema, GraphViewSchema } from './graph/view.js';
export type { GraphDeploymentView, GraphView } from './graph/view.js';
export { FnActorEnvSchema, FnSignatureSchema } from './protocol/fn-actor.js';
export type { FnActorEnv, FnSignature, StepFn } from './protocol/fn-actor.js';
export {
  ClassActorEnvSchema,
  HOOK_METHODS,
  InvokeReplySchema,
  MAX_METHOD_ARGS,
  MAX_STREAM_CREDIT,
  MethodNameSchema,
  StreamItemSchema,
} from './protocol/class-actor.js';
export type { ClassActorEnv, ClassMethods, InvokeReply, StreamItem } from './protocol/class-actor.js';
export { MAX_SESSION_KEY, MAX_STREAM_WINDOW, MethodCallReplySchema, MethodCallSchema } from './protocol/method-call.js';
export type { CallRef, MethodCall, MethodStream } from './protocol/method-call.js';
export { CallQueue, MAX_QUEUE_WAIT_MS, rendezvous, replicaCallLimit } from './dispatch/call-queue.js';
export { ReplicaLink } from './dispatch/replica-link.js';
export type { InvokeOrigin, LinkStream } from './dispatch/replica-link.js';
export type { CallResult, DispatchOptions, QueueTarget, Replica } from './dispatch/call-queue.js';
export { authError, isLoopback, needsToken } from './http/auth.js';
export type { AuthPolicy } from './http/auth.js';
export { bodyTooLarge, drainingError, errorResponse, requestFailed, toHttpError } from './http/errors.js';
export type { HttpError } from './http/errors.js';
export { serveInPlace } from './http/in-place-connection.js';
export type { InPlaceOptions } from './http/in-place-connection.js';
export {
  alignmentPad,
  answerInference,
  errorAnswer,
  headerLengthOf,
  inferRoute,
  refusal,
  TENSOR_ALIGNMENT,
} from './http/infer-exchange.js';
export type { HttpAnswer, InferBody, InferExchangeOptions, InferRoute } from './http/infer-exchange.js';
export { checkedBy, firstLine, parseJson } from './http/parse-json.js';
export { relayToHead } from './http/relay.js';
export { ShutdownGate } from './http/shutdown-gate.js';
export { binaryBody, BinaryReader, decodeBytesElements, encodeBytesElements, HEADER_LENGTH, splitInferBody } from './oip/binary.js';
export type { SplitBody } from './oip/binary.js';
export { classCounts, classify, classifyOutputs, printfFixed6 } from './oip/classification.js';
export {
  decodeInferRequest,
  encodeInferResponse,
  InferRequestSchema,
  ParametersSchema,
  RequestInputSchema,
  RequestOutputSchema,
  wantsBinary,
} from './oip/codec.js';
export type { DecodedRequest, EncodedResponse, InferRequest } from './oip/codec.js';
export {
  ACCEPTED_REQUEST_CODINGS,
  decodeBody,
  encodeBody,
  isEncoded,
  MIN_COMPRESSED_BYTES,
  responseCoding,
  responseCodingFor,
  unsupportedCoding,
} from './oip/content-coding.js';
export type { ContentCoding } from './oip/content-coding.js';
export { datatypeOfDtype, dtypeOfDatatype, OIP_DATATYPES, OIP_TO_DTYPE, oipDtype, oipShape } from './oip/datatypes.js';
export type { OipDatatype, OipDType } from './oip/datatypes.js';
export { fromHalfBits, toHalfBits } from './oip/float16.js';
export {
  checkInferRequest,
  findTarget,
  MODEL_VERSION,
  notTensorTarget,
  splitModelName,
  takesAnything,
  unknownVersion,
} from './oip/infer-backend.js';
export type { InferenceAnswer, InferenceBackend, InferenceRequest, InferTarget, Params } from './oip/infer-backend.js';
export { answeredAs, inferResponse, outputOrder } from './oip/infer-response.js';
export { checkInferJson, MAX_JSON_VALUES, MAX_REQUEST_ELEMENTS, tooMany } from './oip/json-scan.js';
export { flattenData, jsonTextOfWire, wireFromJson } from './oip/json.js';
export {
  GenerateRequestSchema,
  GenerateResponseSchema,
  MAX_GENERATE_INPUTS,
  generateInputs,
  generateResponseText,
  generateValues,
} from './oip/generate.js';
export type { GenerateRequest } from './oip/generate.js';
export { isRawRequest, rawInferRequest } from './oip/raw.js';
