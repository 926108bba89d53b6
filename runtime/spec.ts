import { z } from 'zod';
import { NameSchema } from './protocol/common.js';

const UNITS: Record<string, number> = { '': 1, k: 1e3, m: 1e6, g: 1e9, t: 1e12, ki: 2 ** 10, mi: 2 ** 20, gi: 2 ** 30, ti: 2 ** 40 };

/** '512Mi' -> 536870912; plain numbers are bytes. */
function toBytes(value: number | string, ctx: z.RefinementCtx): number {
  if (typeof value === 'number') return value;
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*$/i.exec(value);
  const scale = match ? UNITS[(match[2] ?? '').toLowerCase()] : undefined;
  if (!match || scale === undefined) {
    ctx.addIssue({ code: 'custom', message: `'${value}' is not a size: use bytes or a unit such as 512Mi, 2Gi, 1.5GB` });
    return z.NEVER;
  }
  return Math.round(Number(match[1]) * scale);
}

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
    /** Host memory each replica needs, in bytes or with a unit ('512Mi', '2Gi', '1.5GB'). */
    memory: z.union([z.number().int().nonnegative(), z.string()]).transform(toBytes).optional(),
    /** `spread` replicas over nodes, then GPUs (default), or `pack` them onto the busiest node that fits. */
    placement: z.enum(['spread', 'pack']).default('spread'),
    /** onnxruntime intra-op threads per actor; 1 halves CPU per call on small models. */
    threads: z.number().int().min(1).max(256).optional(),
    /** Calls allowed queued or in flight per replica before callers get TROUPE_ERR_OVERLOADED. */
    maxQueue: z.number().int().min(1).max(1_000_000).default(1024),
  })
  .strict()
  .refine((d) => d.gpus <= 1 || Number.isInteger(d.gpus), { message: 'gpus above 1 must be a whole number', path: ['gpus'] });

export type ModelDeploymentInput = z.input<typeof ModelDeploymentSchema>;
export type ModelDeployment = z.output<typeof ModelDeploymentSchema>;
