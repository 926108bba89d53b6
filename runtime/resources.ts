import * as z from 'zod';

/**
 * One GPU as a node agent reports it. Real GPUs come from `nvidia-smi`; simulated ones
 * (`--simulate-gpus`) carry `simulated: true` so every view of them can say so.
 */
export const GpuSchema = z.object({
  index: z.number().int().min(0),
  uuid: z.string().min(1).max(128),
  name: z.string().max(256),
  memoryTotalMiB: z.number().min(0),
  memoryUsedMiB: z.number().min(0).nullable(),
  utilizationPct: z.number().min(0).max(100).nullable(),
  simulated: z.boolean(),
});
export type Gpu = z.infer<typeof GpuSchema>;

/** GPU memory held by one process, from `nvidia-smi --query-compute-apps`. */
export const GpuProcessSchema = z.object({
  gpuUuid: z.string().min(1).max(128),
  pid: z.number().int().positive(),
  usedMemoryMiB: z.number().min(0).nullable(),
});
export type GpuProcess = z.infer<typeof GpuProcessSchema>;

/** What a node offers to the scheduler. */
export const NodeResourcesSchema = z.object({
  cpus: z.number().positive(),
  memoryBytes: z.number().nonnegative(),
  /** Most actor processes the node runs at once (`--max-actors`); absent: {@link defaultMaxActors}. */
  maxActors: z.number().int().positive().max(100_000).optional(),
  gpus: z.array(GpuSchema).max(64),
});
export type NodeResources = z.infer<typeof NodeResourcesSchema>;

/** Actors allowed per CPU when a node names no `--max-actors`: each is a process of ~100 MB. */
export const ACTORS_PER_CPU = 8;

/** A node's actor cap when it names none: 8 per CPU it offers, at least 1. */
export function defaultMaxActors(cpus: number): number {
  return Math.max(1, Math.floor(cpus * ACTORS_PER_CPU));
}

/** The actor cap a node's resources give (its own, or the default for its CPUs). */
export function maxActorsOf(resources: NodeResources): number {
  return resources.maxActors ?? defaultMaxActors(resources.cpus);
}

/**
 * CPUs and GPU shares are counted in thousandths (milli-CPUs, as Kubernetes counts them): a sum
 * of 0.1s and 0.25s in floating point drifts (0.34999999999999987 CPUs free), and a comparison
 * against it needs an epsilon. Specs name at most three decimals, so these conversions are exact.
 */
export const MILLI_PER_UNIT = 1000;

/** `amount` (CPUs, a GPU share) in whole thousandths. */
export function toMilli(amount: number): number {
  return Math.round(amount * MILLI_PER_UNIT);
}

/** Whole thousandths back as the number a person writes (350 → 0.35). */
export function fromMilli(milli: number): number {
  return milli / MILLI_PER_UNIT;
}

/** A sum of amounts counted exactly (0.1 + 0.25 is 0.35, not 0.35000000000000003). */
export function sumAmounts(amounts: Iterable<number>): number {
  let milli = 0;
  for (const a of amounts) milli += toMilli(a);
  return fromMilli(milli);
}

/** True when `amount` has at most three decimals, the precision resources are counted in. */
export function isMilliAmount(amount: number): boolean {
  return Math.abs(amount * MILLI_PER_UNIT - toMilli(amount)) < 1e-6;
}
