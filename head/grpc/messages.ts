import { z } from 'zod';

/**
 * The request messages as they reach the handlers. The describing methods' requests come from
 * @grpc/proto-loader (service-definition.ts's options) and are checked again with zod: protobuf
 * decoding gives each field its declared type, but the bounds are ours. ModelInferRequest has its
 * own codec and its bounds are checked without a schema's walk (infer-request-limits.ts): it is
 * the hot path. Tensor contents are checked element by element where they are decoded
 * (infer-request.ts).
 */

/** An InferParameter: its oneof names the field it holds; 64-bit integers as decimal strings (every digit kept). */
export interface InferParameter {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';
  bool_param?: boolean;
  int64_param?: string;
  string_param?: string;
  double_param?: number;
  uint64_param?: string;
}

/** Each datatype's elements in their repeated field; 64-bit integers as decimal strings. */
export interface TensorContents {
  bool_contents: boolean[];
  int_contents: number[];
  int64_contents: string[];
  uint_contents: number[];
  uint64_contents: string[];
  fp32_contents: number[];
  fp64_contents: number[];
  bytes_contents: Uint8Array[];
}

/**
 * A ModelInferRequest as its codec decodes it (infer-request-codec.ts): every field at its
 * default when absent; shapes as numbers (an int64 past 2^53 inexact, and refused by the shape
 * check); raw_input_contents as slices of the received message.
 */
export interface ModelInferRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameter>;
  inputs: {
    name: string;
    datatype: string;
    shape: number[];
    parameters: Record<string, InferParameter>;
    contents: TensorContents | null;
  }[];
  outputs: { name: string; parameters: Record<string, InferParameter> }[];
  raw_input_contents: Uint8Array[];
}

/** ModelReady, ModelMetadata, ModelConfig and ModelStatistics all name a model and, optionally, a version. */
export const ModelRequestSchema = z.object({ name: z.string().max(256), version: z.string().max(64) });

export const RepositoryIndexRequestSchema = z.object({ repository_name: z.string().max(256), ready: z.boolean() });

/** One output as ModelInferResponse carries it. */
export interface InferOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
  contents?: Partial<Record<keyof TensorContents, unknown[]>>;
}

export interface ModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  outputs: InferOutputTensor[];
  raw_output_contents: Uint8Array[];
}
