/**
 * Fake GPUs for `--simulate-gpus`: lets the scheduler, placement and dashboards be
 * exercised on machines without NVIDIA hardware. `simulated: true` travels with every GPU
 * so no view can mistake one for real hardware.
 */

/** The most GPUs a node may report (NodeResourcesSchema caps `gpus` at 64). */
export const MAX_SIMULATED_GPUS = 64;
export const DEFAULT_SIMULATED_MEMORY_MIB = 16384;

export function simulatedGpus(count: number, memoryMiB = DEFAULT_SIMULATED_MEMORY_MIB): Gpu[] {
  if (!Number.isInteger(count) || count < 0 || count > MAX_SIMULATED_GPUS) {
    throw new RangeError(`simulated GPU count must be an integer from 0 to ${MAX_SIMULATED_GPUS}, got ${count}`);
  }
  if (!Number.isFinite(memoryMiB) || memoryMiB < 0) {
    throw new RangeError(`simulated GPU memory must be a non-negative number of MiB, got ${memoryMiB}`);
  }
  return Array.from({ length: count }, (_, index) => ({
    index,
    uuid: `GPU-sim-${index}`,
    name: 'Simulated GPU',
    memoryTotalMiB: memoryMiB,
    // Idle: nothing real is running, so there is nothing to report as in use.
    memoryUsedMiB: 0,
    utilizationPct: 0,
    simulated: true,
  }));
}
import type { Gpu } from '../../runtime/internal.js';
