import { EVERY_OUTPUT, MODEL_VERSION, TroupeError, labelFilesOf, unknownVersion } from '../../runtime/internal.js';
import type { DType, ModelMetadata, Params, Signature, TensorInfo } from '../../runtime/internal.js';
import type { RunGateway } from '../graph/run-gateway.js';
import { PLATFORMS } from './oip-models.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';
import type { TritonModelStat } from '../state/inference-statistics.js';
import { versionMap } from '../control/versions.js';
import { tenantMetadata, tenantNamed, tenantStats } from '../control/tenants.js';
import { servedLayout } from '../state/deployment-layout.js';

/**
 * A deployment as Triton's model configuration (model_config.proto, in the JSON shape Triton's
 * `GET /v2/models/{m}/config` answers): what Triton's clients and tools read to learn a model's
 * batching, tensors and instances. A function of the deployment alone, so every protocol that
 * serves it (HTTP here, gRPC's ModelConfig) gives the same answer.
 */

/** model_config.proto's DataType for each dtype; int4/uint4 have none (TYPE_INVALID). */
const DATA_TYPES: Record<DType, string> = {
  bool: 'TYPE_BOOL',
  uint8: 'TYPE_UINT8',
  uint16: 'TYPE_UINT16',
  uint32: 'TYPE_UINT32',
  uint64: 'TYPE_UINT64',
  int8: 'TYPE_INT8',
  int16: 'TYPE_INT16',
  int32: 'TYPE_INT32',
  int64: 'TYPE_INT64',
  float16: 'TYPE_FP16',
  float32: 'TYPE_FP32',
  float64: 'TYPE_FP64',
  string: 'TYPE_STRING',
  int4: 'TYPE_INVALID',
  uint4: 'TYPE_INVALID',
};

export function tritonDataType(dtype: string): string {
  return Object.hasOwn(DATA_TYPES, dtype) ? DATA_TYPES[dtype as DType] : 'TYPE_INVALID';
}

export interface TritonTensorConfig {
  name: string;
  data_type: string;
  dims: number[];
}

export interface TritonModelConfig {
  name: string;
  platform: string;
  backend: string;
  version_policy: { latest: { num_versions: number } };
  max_batch_size: number;
  input: (TritonTensorConfig & { format: string; is_shape_tensor: boolean; allow_ragged_batch: boolean; optional: boolean })[];
  output: (TritonTensorConfig & { label_filename: string; is_shape_tensor: boolean })[];
  instance_group: { name: string; kind: 'KIND_CPU' | 'KIND_GPU'; count: number; gpus: number[] }[];
  dynamic_batching?: {
    preferred_batch_size: number[];
    max_queue_delay_microseconds: number;
    preserve_ordering: boolean;
    default_queue_policy: {
      timeout_action: 'REJECT';
      default_timeout_microseconds: number;
      allow_timeout_override: boolean;
      max_queue_size: number;
    };
  };
  parameters: Record<string, { string_value: string }>;
}

/** Symbolic and negative dims are variable: -1, as Triton writes them. */
function dims(shape: readonly (number | string)[]): number[] {
  return shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1));
}

/**
 * Whether the deployment batches: a batch size above 1 and a variable first dim on every tensor
 * (the rule the actors apply, actors/host.ts). Then, as in Triton, max_batch_size is that size and
 * dims leave the batch axis out; otherwise max_batch_size is 0 and dims are the full shape.
 */
function batches(d: DeploymentRecord, inputs: readonly TensorInfo[], outputs: readonly TensorInfo[]): boolean {
  return servedLayout(d).batchMaxSize > 1 && [...inputs, ...outputs].every((t) => typeof t.shape[0] === 'string');
}

function inputConfig(t: TensorInfo, tensorDims: number[]): TritonModelConfig['input'][number] {
  const base = { name: t.name, data_type: tritonDataType(t.dtype), format: 'FORMAT_NONE', dims: tensorDims };
  return { ...base, is_shape_tensor: false, allow_ragged_batch: false, optional: false };
}

function outputConfig(t: TensorInfo, tensorDims: number[], labelFile: string): TritonModelConfig['output'][number] {
  return { name: t.name, data_type: tritonDataType(t.dtype), dims: tensorDims, label_filename: labelFile, is_shape_tensor: false };
}

/** `as`: a model of a multiplexed set, under its own name and signature, with the deployment's batching and instances. */
export function tritonModelConfig(d: DeploymentRecord, as?: { name: string; metadata: ModelMetadata }): TritonModelConfig {
  const { spec } = d;
  const metadata = as?.metadata ?? d.metadata;
  if (!metadata)
    throw new TroupeError('TROUPE_ERR_NOT_READY', `model '${spec.name}' has no READY replica yet, so its inputs and outputs are not known`);
  const batching = batches(d, metadata.inputs, metadata.outputs);
  const shapeOf = (t: TensorInfo) => dims(batching ? t.shape.slice(1) : t.shape);
  const kind = spec.kind ?? 'model';
  const gpus = [...new Set(d.actors.flatMap((a) => a.gpus))].sort((a, b) => a - b);
  return {
    name: as?.name ?? spec.name,
    // A fn step or a class actor is code of ours, not a model file: no Triton platform fits it.
    platform: kind === 'model' ? 'onnxruntime_onnx' : '',
    backend: kind === 'model' ? 'onnxruntime' : PLATFORMS[kind],
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: batching ? servedLayout(d).batchMaxSize : 0,
    input: metadata.inputs.map((t) => inputConfig(t, shapeOf(t))),
    output: metadata.outputs.map((t) =>
      outputConfig(t, shapeOf(t), labelFilesOf(spec.labels)?.[t.name] ?? labelFilesOf(spec.labels)?.[EVERY_OUTPUT] ?? ''),
    ),
    instance_group: [
      {
        name: spec.name,
        kind: spec.gpus > 0 ? 'KIND_GPU' : 'KIND_CPU',
        count: spec.replicas * servedLayout(d).instances,
        gpus: spec.gpus > 0 ? gpus : [],
      },
    ],
    ...(batching
      ? {
          dynamic_batching: {
            preferred_batch_size: spec.batch?.preferredSizes ?? [],
            // Troupe's batches wait for nothing unless waitWhenIdle asks (docs/batching.md).
            max_queue_delay_microseconds: spec.batch?.waitWhenIdle ? Math.round(spec.batch.maxDelayMs * 1000) : 0,
            preserve_ordering: false,
            default_queue_policy: {
              timeout_action: 'REJECT',
              default_timeout_microseconds: 0,
              allow_timeout_override: true,
              max_queue_size: spec.maxQueue,
            },
          },
        }
      : {}),
    parameters: {},
  };
}

/**
 * A graph as Triton describes an ensemble: platform "ensemble", its inputs and outputs as its
 * steps' signatures give them (full shapes, variable dims -1, no batch axis of its own), and no
 * instances (its steps' deployments hold them, each with a configuration of its own).
 */
export function tritonGraphConfig(name: string, signature: Signature): TritonModelConfig {
  if (!signature.inputs || !signature.outputs)
    throw new TroupeError(
      'TROUPE_ERR_NOT_READY',
      `graph '${name}' has a step that declares no tensors (a fn without a signature), so its inputs and outputs are not known`,
    );
  return {
    name,
    platform: 'ensemble',
    backend: '',
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: 0,
    input: signature.inputs.map((t) => inputConfig(t, dims(t.shape))),
    output: signature.outputs.map((t) => outputConfig(t, dims(t.shape), '')),
    instance_group: [],
    parameters: {},
  };
}

/** The configuration of what a request names: a deployment, a model of a multiplexed set, or a graph (as an ensemble). */
export async function tritonConfigOf(state: ClusterState, graphs: RunGateway, params: Params): Promise<TritonModelConfig> {
  const tenant = tenantNamed(state, params);
  if (tenant) return tritonModelConfig(tenant.d, { name: tenant.name, metadata: await tenantMetadata(state, tenant) });
  const signature = state.deployments.has(params.name) ? undefined : graphs.signature(params.name);
  if (!signature) return tritonModelConfig(tritonDeployment(state, params));
  if (params.version !== undefined && params.version !== MODEL_VERSION) throw unknownVersion(params.name, params.version, [MODEL_VERSION]);
  return tritonGraphConfig(params.name, signature);
}

/**
 * Triton's statistics of what a request names: a deployment's, or, for one split between versions,
 * each version's (the deployment running it counts its calls) under the name and version asked for;
 * a model of a multiplexed set's own (control/tenants.ts).
 */
export async function tritonStatsOf(state: ClusterState, params: Params): Promise<TritonModelStat[]> {
  const tenant = tenantNamed(state, params);
  if (tenant) return tenantStats(state, tenant);
  const d = state.deployments.get(params.name);
  const versions = d ? versionMap(d.spec) : undefined;
  if (!versions) {
    const one = tritonDeployment(state, params);
    return [one.stats.triton(one.spec.name)];
  }
  if (params.version !== undefined && !Object.hasOwn(versions, params.version))
    throw unknownVersion(params.name, params.version, Object.keys(versions));
  const asked = params.version === undefined ? Object.keys(versions) : [params.version];
  return asked.flatMap((version) => {
    const running = state.deployments.get(versions[version]!);
    return running ? [{ ...running.stats.triton(params.name), version }] : [];
  });
}

/** The deployment and version a request names (TROUPE_ERR_UNKNOWN_DEPLOYMENT otherwise, naming only what was asked for). */
export function tritonDeployment(state: ClusterState, params: Params): DeploymentRecord {
  const { name, version } = params;
  const d = state.deployments.get(name);
  if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `unknown model '${name.slice(0, 100)}'`);
  if (version !== undefined && version !== MODEL_VERSION) throw unknownVersion(d.spec.name, version, [MODEL_VERSION]);
  return d;
}
