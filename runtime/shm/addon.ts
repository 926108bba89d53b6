import { nativeAddon } from '../native-addon.js';

/** native/troupe-shm.c, loaded: memfd regions one process makes and another maps. */
export interface SharedMemoryAddon {
  /** A new region of `bytes`, sealed against shrinking and growing, mapped here; `fd` stays open while it is. */
  create(bytes: number): { buffer: ArrayBuffer; fd: number };
  /** Maps the region another process (`pid`) holds as `fd`; throws why it cannot (gone, not a sealed region, too small). */
  open(pid: number, fd: number, bytes: number): ArrayBuffer;
}

const load = nativeAddon<SharedMemoryAddon>('troupe_shm.node');

/**
 * The shared-memory addon, or why this process goes without it: not built or not loadable (see
 * runtime/native-addon.ts), or turned off with TROUPE_SHARED_MEMORY=0. Without it, clients send
 * tensors in frames and actors refuse regions: slower for large tensors, same results.
 */
export function sharedMemoryAddon(): SharedMemoryAddon | string {
  if (process.env.TROUPE_SHARED_MEMORY === '0') return 'turned off by TROUPE_SHARED_MEMORY=0';
  return load();
}
