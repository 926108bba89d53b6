import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** native/troupe-handoff.c, loaded: TCP connections passed between processes of one host (SCM_RIGHTS). */
export interface HandoffAddon {
  /** A listening socket at the abstract address `name`. */
  listen(name: string): number;
  /** The pending connection if its peer is process `pid` (throws if another process came), or -1 when none is pending. */
  accept(fd: number, pid: number): number;
  /** A socket connected to the abstract address `name` on this host; throws when nothing listens there. */
  connect(name: string): number;
  /** Queues a duplicate of `socketFd` for the peer; false when the socket's queue is full. */
  send(fd: number, socketFd: number): boolean;
  /** The next descriptor the peer queued, or -1 when none is. */
  receive(fd: number): number;
  close(fd: number): void;
}

/** Where `npm run build` puts the addon (scripts/build-native.mjs), next to this file's dist/ tree. */
const ADDON_PATH = fileURLToPath(new URL('../../native/troupe_handoff.node', import.meta.url));

let loaded: HandoffAddon | string | undefined;

/**
 * The handoff addon, or why this process goes without it (not built: no C compiler when the
 * package was built, or not Linux). Without it, the head's front-door workers serve every
 * HTTP connection, as they do for replicas on other hosts.
 */
export function handoffAddon(): HandoffAddon | string {
  if (loaded === undefined) {
    if (!existsSync(ADDON_PATH)) loaded = `the addon was not built (${ADDON_PATH}; see scripts/build-native.mjs)`;
    else {
      try {
        loaded = createRequire(import.meta.url)(ADDON_PATH) as HandoffAddon;
      } catch (err) {
        loaded = `the addon does not load: ${(err as Error).message.split('\n')[0]}`;
      }
    }
  }
  return loaded;
}
