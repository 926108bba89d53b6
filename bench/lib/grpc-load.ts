import type { ServiceDefinition } from '@grpc/grpc-js';
import { tensor } from '../../runtime/internal.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../../test/helpers/grpc-client.js';
import { runInProcess } from '../../test/helpers/tensors.js';
import { grpcFrame, h2loadGrpc, verifyGrpcAnswers } from './h2load-grpc.js';
import { h2loadAvailable } from './h2load.js';
import { closedLoop } from './load.js';
import type { LoadResult } from './load.js';

/**
 * Closed-loop load on a head's gRPC endpoint: ModelInfer with the input in raw_input_contents
 * (what tritonclient.grpc sends), `concurrency` calls in flight on one HTTP/2 connection (as a
 * gRPC client multiplexes its calls). The load generator is h2load where it is installed (see
 * h2load.ts; `apt-get install -y nghttp2-client`), sending the message a grpc-js client
 * encodes, so the figure measures the server; else the grpc-js client itself. Before the first
 * timed run against an address and model, a sample of answers is checked: grpc-status 0 and the
 * output the model gives in this process (onnxruntime-node), within float tolerance.
 */

export const GRPC_GENERATOR = h2loadAvailable() ? 'h2load' : 'grpc-js client';

export interface GrpcInput {
  name: string;
  shape: number[];
  data: Float32Array;
}

const verified = new Set<string>();

function close(actual: Float32Array, expected: Float32Array, what: string): void {
  if (actual.length !== expected.length) throw new Error(`${what}: ${actual.length} values, expected ${expected.length}`);
  actual.forEach((v, i) => {
    if (!(Math.abs(v - expected[i]!) <= 1e-4 + 1e-3 * Math.abs(expected[i]!)))
      throw new Error(`${what}: value ${i} is ${v}, expected ${expected[i]}`);
  });
}

async function verify(address: string, model: string, modelPath: string, input: GrpcInput, framed: Buffer, service: ServiceDefinition) {
  const key = `${address} ${model}`;
  if (verified.has(key)) return;
  const reference = await runInProcess(modelPath, { [input.name]: tensor('float32', input.shape, input.data) });
  const expected = Object.values(reference)[0]!.data as Float32Array;
  await verifyGrpcAnswers(address, framed, (message) => {
    // Decoded by the client's protobufjs, not by the head's codec.
    const answer = service.ModelInfer!.responseDeserialize(message) as { raw_output_contents: Buffer[] };
    close(floatsOfRaw(answer.raw_output_contents[0]!), expected, `gRPC answer of ${model}`);
  });
  verified.add(key);
}

export async function grpcLoad(
  address: string,
  model: string,
  modelPath: string,
  input: GrpcInput,
  concurrency: number,
  seconds: number,
): Promise<LoadResult> {
  const grpc = grpcClient(address);
  const request = {
    model_name: model,
    inputs: [{ name: input.name, datatype: 'FP32', shape: input.shape.map(String) }],
    raw_input_contents: [rawFloats(input.data)],
  };
  try {
    const service = (grpc.client.constructor as unknown as { service: ServiceDefinition }).service;
    const framed = grpcFrame(service.ModelInfer!.requestSerialize(request));
    await verify(address, model, modelPath, input, framed, service);
    if (GRPC_GENERATOR === 'h2load') return await h2loadGrpc(address, framed, concurrency, seconds);
    return await closedLoop(() => grpc.call('ModelInfer', request), { concurrency, seconds });
  } finally {
    grpc.close();
  }
}
