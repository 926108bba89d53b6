import { z } from 'zod';
import { NameSchema } from './protocol/common.js';

/**
 * What a user asks for when deploying one model. `model` is a path under the agent's model
 * directory. `gpus` may be a fraction (0.5 shares a device) or a whole number of devices.
 */
export const ModelDeploymentSchema = z
  .object({
    name: NameSchema,
    model: z.string().min(1).max(1024),
    replicas: z.number().int().min(1).max(256).default(1),
    gpus: z.number().min(0).max(64).default(0),
    cpus: z.number().positive().max(1024).default(1),
    /** onnxruntime intra-op threads per actor; 1 halves CPU per call on small models. */
    threads: z.number().int().min(1).max(256).optional(),
    /** Calls allowed queued or in flight per replica before callers get TROUPE_ERR_OVERLOADED. */
    maxQueue: z.number().int().min(1).max(1_000_000).default(1024),
  })
  .strict()
  .refine((d) => d.gpus <= 1 || Number.isInteger(d.gpus), { message: 'gpus above 1 must be a whole number', path: ['gpus'] });

export type ModelDeploymentInput = z.input<typeof ModelDeploymentSchema>;
export type ModelDeployment = z.output<typeof ModelDeploymentSchema>;
