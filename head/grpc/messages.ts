import { z } from 'zod';

/**
 * The request messages as @grpc/proto-loader decodes them (service-definition.ts's options), checked
 * again with zod: protobuf decoding gives each field its declared type, but the bounds (name
 * lengths, counts, ranks) are ours, the same as the HTTP schema's (runtime/oip/codec.ts). Tensor
 * contents are checked element by element where they are decoded (infer-request.ts), not here:
 * a schema that visited millions of numbers would cost as much again as the decoding.
 */

/** A 64-bit integer field: a decimal string (longs: String). */
const Int64 = z.string().regex(/^-?\d{1,20}$/);

export const InferParameterSchema = z.object({
  parameter_choice: z.enum(['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param']).optional(),
  bool_param: z.boolean().optional(),
  int64_param: Int64.optional(),
  string_param: z.string().max(4096).optional(),
  double_param: z.number().optional(),
  uint64_param: Int64.optional(),
});
export type InferParameter = z.infer<typeof InferParameterSchema>;

const ParameterMapSchema = z.record(z.string().max(256), InferParameterSchema);

/** A list whose elements are left to the decoder: z.array would visit each of millions. */
const Elements = z.custom<unknown[]>((v) => Array.isArray(v), 'must be a list');

export const TensorContentsSchema = z.object({
  bool_contents: Elements,
  int_contents: Elements,
  int64_contents: Elements,
  uint_contents: Elements,
  uint64_contents: Elements,
  fp32_contents: Elements,
  fp64_contents: Elements,
  bytes_contents: Elements,
});
export type TensorContents = z.infer<typeof TensorContentsSchema>;

export const ModelInferRequestSchema = z.object({
  model_name: z.string().max(256),
  model_version: z.string().max(64),
  id: z.string().max(256),
  parameters: ParameterMapSchema,
  inputs: z
    .array(
      z.object({
        name: z.string().min(1).max(256),
        datatype: z.string().max(64),
        shape: z.array(Int64).max(16),
        parameters: ParameterMapSchema,
        contents: TensorContentsSchema.nullable().optional(),
      }),
    )
    .max(1024),
  outputs: z.array(z.object({ name: z.string().min(1).max(256), parameters: ParameterMapSchema })).max(1024),
  raw_input_contents: z.array(z.instanceof(Uint8Array)).max(1024),
});
export type ModelInferRequest = z.infer<typeof ModelInferRequestSchema>;

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
