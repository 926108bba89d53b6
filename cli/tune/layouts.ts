import type { ModelDeploymentInput } from '../../runtime/internal.js';

/** One layout `troupe tune` deploys and measures. `auto`: nothing named, what a first deploy gets. */
export interface Layout {
  auto: boolean;
  replicas: number;
  instances: number;
  threads: number;
  batchMaxSize: number;
  /** With a delay, a batch's first call waits up to this long for company (waitWhenIdle). */
  delayMs: number;
}

export function layoutLabel(l: Layout): string {
  if (l.auto) return 'first deploy (nothing named: chosen at load)';
  const batch = l.batchMaxSize > 1 ? `batch ${l.batchMaxSize}${l.delayMs > 0 ? ` wait ${l.delayMs} ms` : ''}` : 'no batching';
  return `${l.replicas} replica${l.replicas === 1 ? '' : 's'} x ${l.instances} instance${l.instances === 1 ? '' : 's'} x ${l.threads} thread${l.threads === 1 ? '' : 's'}, ${batch}`;
}

/**
 * The sweep: the first-deploy layout, then every split of `cpus` cores into replicas x instances
 * x threads that uses them all or, for a single session, one core (replicas and instances first:
 * on a CPU, sessions of one thread side by side beat one session of many, docs/performance.md),
 * each with every batch size and delay asked for. Ordered so a sweep cut short by its time bound
 * has measured the likeliest layouts.
 */
export function sweep(cpus: number, batchSizes: readonly number[], delaysMs: readonly number[]): Layout[] {
  const shapes: { replicas: number; instances: number; threads: number }[] = [];
  for (let replicas = 1; replicas <= cpus; replicas++)
    for (let instances = 1; replicas * instances <= cpus; instances++) {
      const threads = Math.floor(cpus / (replicas * instances));
      if (replicas * instances * threads === cpus) shapes.push({ replicas, instances, threads });
    }
  if (cpus > 1) shapes.push({ replicas: 1, instances: 1, threads: 1 });
  // Most sessions first, fewest threads each.
  shapes.sort((a, b) => a.threads - b.threads || a.replicas - b.replicas);
  const layouts: Layout[] = [{ auto: true, replicas: 1, instances: 1, threads: 1, batchMaxSize: 0, delayMs: 0 }];
  for (const batchMaxSize of batchSizes)
    for (const delayMs of batchMaxSize > 1 ? delaysMs : [0])
      for (const shape of shapes) layouts.push({ auto: false, ...shape, batchMaxSize, delayMs });
  return layouts;
}

/** The deployment spec of a layout, as `troupe deploy` takes it. */
export function specOf(name: string, model: string, l: Layout): ModelDeploymentInput {
  if (l.auto) return { name, model };
  return {
    name,
    model,
    replicas: l.replicas,
    threads: l.threads,
    ...(l.instances > 1 ? { instances: l.instances } : {}),
    batch: { maxSize: l.batchMaxSize, ...(l.delayMs > 0 ? { maxDelayMs: l.delayMs, waitWhenIdle: true } : {}) },
  };
}
