import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** native/troupe-shm.c, loaded: memfd regions one process makes and another maps. */
export interface SharedMemoryAddon {
  /** A new region of `bytes`, sealed against shrinking and growing, mapped here; `fd` stays open while it is. */
  create(bytes: number): { buffer: ArrayBuffer; fd: number };
  /** Maps the region another process (`pid`) holds as `fd`; throws why it cannot (gone, not a sealed region, too small). */
  open(pid: number, fd: number, bytes: number): ArrayBuffer;
}

/** Where `npm run build` puts the addon (scripts/build-native.mjs), next to this file's dist/ tree. */
const ADDON_PATH = fileURLToPath(new URL('../../native/troupe_shm.node', import.meta.url));

let loaded: SharedMemoryAddon | string | undefined;

/**
 * The shared-memory addon, or why this process goes without it: not built (no C compiler when
 * the package was built, or not Linux), or turned off with TROUPE_SHARED_MEMORY=0. Without it,
 * clients send tensors in frames and actors refuse regions: slower for large tensors, same results.
 */
export function sharedMemoryAddon(): SharedMemoryAddon | string {
  if (process.env.TROUPE_SHARED_MEMORY === '0') return 'turned off by TROUPE_SHARED_MEMORY=0';
  if (loaded === undefined) {
    if (!existsSync(ADDON_PATH)) loaded = `the addon was not built (${ADDON_PATH}; see scripts/build-native.mjs)`;
    else {
      try {
        loaded = createRequire(import.meta.url)(ADDON_PATH) as SharedMemoryAddon;
      } catch (err) {
        loaded = `the addon does not load: ${(err as Error).message.split('\n')[0]}`;
      }
    }
  }
  return loaded;
}
