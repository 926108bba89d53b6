import { Metadata, credentials, loadPackageDefinition } from '@grpc/grpc-js';
import type { GrpcObject, ServiceClientConstructor, ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { Pool } from 'undici';
import { LOADER_OPTIONS } from '../../head/grpc/service-definition.js';
import { DTYPES, TroupeError, datatypeOfDtype, tensor } from '../../runtime/internal.js';
import type { Cluster, ModelMetadata, NumericDType, Tensor } from '../../runtime/internal.js';

/** The doors `troupe tune` drives load through: what a client of the deployment would use. */
export const DOORS = ['http', 'grpc', 'sdk'] as const;
export type Door = (typeof DOORS)[number];

/** One call through a door, and what it holds open. */
export interface DoorCaller {
  call(): Promise<void>;
  close(): Promise<void>;
}

/** One input of a deployment's signature, symbolic dims set to 1, filled with a deterministic pattern. */
function sampleTensor(name: string, dtype: string, shape: readonly (number | string)[]): Tensor {
  if (!(dtype in DTYPES) || dtype === 'string' || DTYPES[dtype as NumericDType].bytes < 1)
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `tune: input '${name}' is ${dtype}: tune sends numeric tensors of whole bytes only`);
  const dims = shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1));
  const count = dims.reduce((a, b) => a * b, 1);
  const Array = DTYPES[dtype as Exclude<NumericDType, 'int4' | 'uint4'>].array;
  const data = new Array(count);
  if (data instanceof Float32Array || data instanceof Float64Array) for (let i = 0; i < count; i++) data[i] = Math.sin(i) / 2;
  return tensor(dtype as NumericDType, dims, data as Float32Array);
}

export function sampleInputs(metadata: ModelMetadata): Record<string, Tensor> {
  return Object.fromEntries(metadata.inputs.map((i) => [i.name, sampleTensor(i.name, i.dtype, i.shape)]));
}

const bytesOf = (t: Tensor) => {
  const view = t.data as ArrayBufferView;
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
};

/** The inference protocol over HTTP/1.1, binary tensor data, one kept-alive connection per call in flight (as Triton's perf_analyzer). */
function httpCaller(url: string, name: string, inputs: Record<string, Tensor>, concurrency: number, token?: string): DoorCaller {
  const header = Buffer.from(
    JSON.stringify({
      inputs: Object.entries(inputs).map(([n, t]) => ({
        name: n,
        shape: t.shape,
        datatype: datatypeOfDtype(t.dtype),
        parameters: { binary_data_size: bytesOf(t).byteLength },
      })),
    }),
  );
  const body = Buffer.concat([header, ...Object.values(inputs).map(bytesOf)]);
  const origin = new URL(url).origin;
  const pool = new Pool(origin, { connections: concurrency, pipelining: 1 });
  const headers: Record<string, string> = {
    'content-type': 'application/octet-stream',
    'inference-header-content-length': String(header.byteLength),
    ...(token ? { authorization: `Bearer ${token}` } : {}),
  };
  const path = `/v2/models/${encodeURIComponent(name)}/infer`;
  return {
    call: async () => {
      const answer = await pool.request({ path, method: 'POST', headers, body });
      await answer.body.arrayBuffer();
      if (answer.statusCode !== 200) throw new TroupeError('TROUPE_ERR_INTERNAL', `HTTP ${answer.statusCode}`);
    },
    close: () => pool.close(),
  };
}

/** The inference protocol over gRPC, raw input contents, every call on one channel (as a gRPC client multiplexes them). */
function grpcCaller(address: string, name: string, inputs: Record<string, Tensor>, token?: string): DoorCaller {
  const inference = loadPackageDefinition(loadSync('grpc_service.proto', LOADER_OPTIONS)).inference as GrpcObject;
  const Service = inference.GRPCInferenceService as ServiceClientConstructor;
  const client = new Service(address, credentials.createInsecure(), {
    'grpc.max_receive_message_length': 256 * 2 ** 20,
    'grpc.max_send_message_length': 256 * 2 ** 20,
  });
  const request = {
    model_name: name,
    inputs: Object.entries(inputs).map(([n, t]) => ({ name: n, datatype: datatypeOfDtype(t.dtype), shape: t.shape.map(String) })),
    raw_input_contents: Object.values(inputs).map(bytesOf),
  };
  const metadata = new Metadata();
  if (token) metadata.set('authorization', `Bearer ${token}`);
  const infer = (client as unknown as Record<string, (r: unknown, m: unknown, done: (err: ServiceError | null) => void) => void>)
    .ModelInfer!;
  return {
    call: () => new Promise<void>((resolve, reject) => infer.call(client, request, metadata, (err) => (err ? reject(err) : resolve()))),
    close: async () => client.close(),
  };
}

/** The SDK: calls straight to the replicas where the cluster allows (docs/sdk.md). */
function sdkCaller(cluster: Cluster, name: string, inputs: Record<string, Tensor>): DoorCaller {
  return {
    call: async () => {
      await cluster.run(name, inputs);
    },
    close: async () => {},
  };
}

export function doorCaller(
  door: Door,
  target: { url: string; grpcAddress: string | undefined; cluster: Cluster; token?: string },
  name: string,
  inputs: Record<string, Tensor>,
  concurrency: number,
): DoorCaller {
  if (door === 'sdk') return sdkCaller(target.cluster, name, inputs);
  if (door === 'http') return httpCaller(target.url, name, inputs, concurrency, target.token);
  if (!target.grpcAddress) throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'tune: --door grpc: the head serves no gRPC endpoint');
  return grpcCaller(target.grpcAddress, name, inputs, target.token);
}
