import type { Gpu } from '../../runtime/internal.js';
import { queryGpus } from './nvidia-smi.js';
import { simulatedGpus } from './simulated.js';

export interface DiscoverGpusOptions {
  /** Report this many simulated GPUs instead of asking nvidia-smi (0 or absent: real GPUs). */
  simulate?: number;
  /** Memory of each simulated GPU, in MiB. */
  simulatedMemoryMiB?: number;
  /** nvidia-smi executable to run (default: `nvidia-smi` from PATH). */
  command?: string;
  /** nvidia-smi timeout in milliseconds (default 5000). */
  timeoutMs?: number;
}

/**
 * The GPUs this node offers. Simulation is explicit: it is never a fallback for a host
 * where nvidia-smi is missing (that host has [] GPUs) or failing (that is an error), so a
 * misconfigured GPU host cannot silently advertise fake hardware.
 */
export async function discoverGpus(opts: DiscoverGpusOptions = {}): Promise<Gpu[]> {
  const { simulate } = opts;
  if (simulate !== undefined && simulate !== 0) {
    return simulatedGpus(simulate, opts.simulatedMemoryMiB);
  }
  return queryGpus({ command: opts.command, timeoutMs: opts.timeoutMs });
}
