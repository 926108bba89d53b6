import * as z from 'zod';
import { ERROR_CODES } from '../errors.js';
import type { ErrorCode } from '../errors.js';

/** Request ids are nanoids or counters as strings; bounded so a peer cannot send megabytes. */
export const IdSchema = z.string().min(1).max(64);

/**
 * How an actor reaches the head, in every actor's environment: its own connection (`direct`, the
 * default), or relayed by its agent over the agent's connection and the actor's IPC channel
 * (`agent`: `troupe agent --actor-links relay`), so the head holds one connection per node.
 */
export const HeadLinkEnv = {
  TROUPE_HEAD_LINK: z.enum(['direct', 'agent']).optional(),
  /**
   * For a head with TLS: the CA its certificate is verified with (PEM text, public), as the agent
   * was given it (`--tls-ca`). An SDK client made inside the actor trusts it too.
   */
  TROUPE_HEAD_CA: z
    .string()
    .max(256 * 1024)
    .includes('-----BEGIN ', { message: 'must be PEM text' })
    .optional(),
};

export const WireErrorSchema = z.object({
  code: z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]),
  message: z.string().max(8192),
});

/** The two replies every request gets exactly one of. */
export const ReplySchema = z.object({ type: z.literal('reply'), id: IdSchema, value: z.unknown() });
export const FailSchema = z.object({ type: z.literal('fail'), id: IdSchema.nullable(), error: WireErrorSchema });
export type Reply = z.infer<typeof ReplySchema>;
/** The reply to a request that answers nothing but that it was done. */
export const AckSchema = z.object({});
export type Fail = z.infer<typeof FailSchema>;

/** Deployment and actor names: safe in URLs, file names and metric labels. */
export const NameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'names are 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit');

/** An input or output as the model declares it; string dims are symbolic (dynamic). */
export const TensorInfoSchema = z.object({
  name: z.string(),
  dtype: z.string(),
  shape: z.array(z.union([z.number(), z.string()])),
});
export type TensorInfo = z.infer<typeof TensorInfoSchema>;

export const ModelMetadataSchema = z.object({
  inputs: z.array(TensorInfoSchema),
  outputs: z.array(TensorInfoSchema),
});
export type ModelMetadata = z.infer<typeof ModelMetadataSchema>;

/** A class actor's method, as calls and specs name it. */
export const MethodNameSchema = z
  .string()
  .regex(/^[A-Za-z$][A-Za-z0-9_$]{0,127}$/, "a method name is 1-128 letters, digits, '_' or '$', not starting with '_' or a digit");
