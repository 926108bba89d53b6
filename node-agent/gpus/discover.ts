import { TroupeError } from '../../runtime/internal.js';
import type { Gpu } from '../../runtime/internal.js';
import { queryGpus } from './nvidia-smi.js';
import { simulatedGpus } from './simulated.js';

export interface DiscoverGpusOptions {
  /** Report this many simulated GPUs instead of asking nvidia-smi (0 or absent: real GPUs). */
  simulate?: number;
  /** Memory of each simulated GPU, in MiB. */
  simulatedMemoryMiB?: number;
  /** nvidia-smi executable to run (default: `nvidia-smi` from PATH); `none`: offer no GPUs, run nothing. */
  command?: string;
  /** nvidia-smi timeout in milliseconds (default 5000). */
  timeoutMs?: number;
}

/**
 * The GPUs this node offers. Simulation is explicit: it is never a fallback for a host
 * where nvidia-smi is missing (that host has [] GPUs) or failing (that is an error, naming the
 * way out), so a misconfigured GPU host cannot silently advertise fake hardware, nor lose its GPUs.
 */
export async function discoverGpus(opts: DiscoverGpusOptions = {}): Promise<Gpu[]> {
  const { simulate } = opts;
  if (simulate !== undefined && simulate !== 0) {
    return simulatedGpus(simulate, opts.simulatedMemoryMiB);
  }
  if (opts.command === NO_GPUS) return [];
  try {
    return await queryGpus({ command: opts.command, timeoutMs: opts.timeoutMs });
  } catch (err) {
    throw new TroupeError(
      'TROUPE_ERR_INTERNAL',
      `cannot list this host's GPUs: ${(err as Error).message} (fix the NVIDIA driver, or start the agent with --nvidia-smi ${NO_GPUS} to offer no GPUs)`,
    );
  }
}

/** The `--nvidia-smi` value of a node that offers no GPUs, whatever nvidia-smi is on its PATH. */
export const NO_GPUS = 'none';
