import * as z from 'zod';
import { HeadLinkEnv, IdSchema, ModelMetadataSchema } from './common.js';
import type { Tensor } from '../tensor/tensor.js';

/**
 * What the agent passes to a fn actor (actors/fn-host) in its environment. A fn actor speaks
 * the same data-plane protocol as a model actor (protocol/actor.ts): `ready` with a signature,
 * then `call` / `reply`.
 */
export const FnActorEnvSchema = z.object({
  TROUPE_HEAD_URL: z.string().url(),
  TROUPE_ACTOR_ID: IdSchema,
  TROUPE_ACTOR_SECRET: z.string().min(8).max(128),
  ...HeadLinkEnv,
  /** Absolute path of the module, already resolved inside the agent's --module-dir. */
  TROUPE_FN_MODULE: z.string().min(1),
  /** The module as the deploy named it: error messages show this, never the absolute path. */
  TROUPE_SHOWN_PATH: z.string().max(1000).optional(),
  TROUPE_FN_EXPORT: z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/),
});
export type FnActorEnv = z.infer<typeof FnActorEnvSchema>;

/** A fn may declare what it takes and gives, so graphs around it are checked at deploy. */
export const FnSignatureSchema = ModelMetadataSchema;
export type FnSignature = z.infer<typeof FnSignatureSchema>;

/**
 * A graph fn step: named tensors in, named tensors out. Attach a `signature` to have its inputs
 * checked like a model's; without one it takes whatever the graph gives it.
 *
 * @example
 * export const double: StepFn = ({ x }) => ({ y: tensor('float32', x!.shape, (x!.data as Float32Array).map((v) => 2 * v)) });
 * double.signature = { inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }], outputs: [{ name: 'y', dtype: 'float32', shape: ['N', 64] }] };
 */
export interface StepFn {
  (inputs: Record<string, Tensor>): Record<string, Tensor> | Promise<Record<string, Tensor>>;
  signature?: FnSignature;
}
