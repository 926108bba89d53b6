// GPU discovery for the node agent. Named re-exports only, so the public surface is explicit.
export { discoverGpus } from './discover.js';
export type { DiscoverGpusOptions } from './discover.js';
export {
  APPS_QUERY_ARGS,
  DEFAULT_NVIDIA_SMI,
  DEFAULT_TIMEOUT_MS,
  GPU_QUERY_ARGS,
  parseComputeApps,
  parseGpuQuery,
  queryComputeApps,
  queryGpus,
} from './nvidia-smi.js';
export type { NvidiaSmiOptions } from './nvidia-smi.js';
export { DEFAULT_SIMULATED_MEMORY_MIB, MAX_SIMULATED_GPUS, simulatedGpus } from './simulated.js';
