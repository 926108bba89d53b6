import * as z from 'zod';
import { IdSchema } from './common.js';

/**
 * Where a model deployment's READY replicas take calls directly, and the limits a client's own
 * queue keeps for them: the same as the head's queue (Ray Serve's handles likewise route to
 * replicas themselves). `replicas` is empty for a graph, a fn, an unknown name, or a deployment
 * with no replica serving directly now; the client then sends its calls through the head.
 */
export const RoutesSchema = z.object({
  deployment: z.string().max(256),
  replicas: z.array(z.object({ actor: IdSchema, url: z.string().url().max(512), token: z.string().min(16).max(128) })).max(4096),
  perReplicaLimit: z.number().int().min(1),
  maxQueue: z.number().int().min(0),
  maxRetries: z.number().int().min(0),
  /** The version the deployment runs when it runs one of a deployment split between versions (`{name}.{version}`). */
  version: z.string().max(64).optional(),
});
export type Routes = z.infer<typeof RoutesSchema>;
