import { grpcClient, rawFloats } from '../../test/helpers/grpc-client.js';
import { closedLoop } from './load.js';
import type { LoadResult } from './load.js';

/**
 * Closed-loop load on the head's gRPC endpoint: ModelInfer with the input in raw_input_contents
 * (what tritonclient.grpc sends), `concurrency` calls in flight on one channel (one HTTP/2
 * connection, as a gRPC client multiplexes its calls).
 */
export async function grpcLoad(
  address: string,
  model: string,
  input: { name: string; shape: number[]; data: Float32Array },
  concurrency: number,
  seconds: number,
): Promise<LoadResult> {
  const grpc = grpcClient(address);
  const request = {
    model_name: model,
    inputs: [{ name: input.name, datatype: 'FP32', shape: input.shape }],
    raw_input_contents: [rawFloats(input.data)],
  };
  try {
    return await closedLoop(() => grpc.call('ModelInfer', request), { concurrency, seconds });
  } finally {
    grpc.close();
  }
}
