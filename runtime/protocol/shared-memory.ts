import * as z from 'zod';
import { DTYPE_NAMES } from '../tensor/dtypes.js';
import { MAX_RANK } from '../tensor/tensor.js';
import { WireTensorSchema } from '../tensor/wire.js';
import { IdSchema } from './common.js';

/**
 * Tensors through shared memory, on a direct stream between a client and an actor on one host
 * (see runtime/shm/). The client offers each of its regions once (`region`); once the actor has
 * mapped it and answered, a call's large inputs name bytes of it instead of carrying them.
 */

/** Regions hold up to 1 TiB; offsets and lengths are counted in bytes from the region's start. */
const MAX_REGION_BYTES = 2 ** 40;

/** An input a client wrote into one of its regions: `bytes` bytes at `offset` of region `region`. */
export const SharedTensorRefSchema = z.object({
  dtype: z.enum(DTYPE_NAMES),
  shape: z.array(z.number()).max(MAX_RANK),
  region: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 31),
  offset: z.number().int().nonnegative().max(MAX_REGION_BYTES),
  bytes: z.number().int().nonnegative().max(MAX_REGION_BYTES),
});
export type SharedTensorRef = z.infer<typeof SharedTensorRefSchema>;

/** A direct call's inputs: each in the frame as usual, or in shared memory. */
export const DirectInputsSchema = z.record(z.string().min(1).max(256), z.union([WireTensorSchema, SharedTensorRefSchema]));
export type DirectInputs = z.infer<typeof DirectInputsSchema>;

/**
 * client -> actor: "map my region `region`": the memfd the client process `pid` holds as `fd`,
 * `bytes` long, whose first bytes spell `nonce` (proof that the actor mapped the client's region,
 * not another process's that happens to have the same pid and fd on another host or namespace).
 * Answered `reply`, or `fail` TROUPE_ERR_SHARED_MEMORY saying why, after which the client sends
 * that connection's tensors in frames.
 */
export const RegionOfferSchema = z.object({
  type: z.literal('region'),
  id: IdSchema,
  region: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 31),
  pid: z
    .number()
    .int()
    .positive()
    .max(2 ** 31),
  fd: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 31),
  bytes: z.number().int().positive().max(MAX_REGION_BYTES),
  nonce: z.string().min(16).max(64),
});
export type RegionOffer = z.infer<typeof RegionOfferSchema>;
