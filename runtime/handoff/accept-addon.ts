import { nativeAddon } from '../native-addon.js';

/** An accept loop the addon runs on a thread of its own. */
export type AcceptorHandle = { readonly __acceptor: unique symbol };

/** native/troupe-accept.c, loaded: a listening socket's accept loop off the event loop. */
export interface AcceptAddon {
  /**
   * Accepts on a duplicate of `listenFd` (the caller closes its own) on a thread of its own, and
   * calls `onArrival` on this thread for each connection once its request head is whole (`whole`),
   * or once it cannot be waited on further (past a head's bound, not a request line, its peer
   * stopped sending). `line` is its first bytes (up to 512, latin1); they are still unread, and the
   * descriptor is the callback's to serve or close. At most `capacity` connections wait (a new one
   * past that closes the oldest); one without a whole head `timeoutMs` after its accept is closed.
   */
  start(
    listenFd: number,
    capacity: number,
    timeoutMs: number,
    onArrival: (fd: number, line: string, whole: boolean) => void,
  ): AcceptorHandle;
  /** Connections accepted and still waiting for a whole request head. */
  waiting(handle: AcceptorHandle): number;
  /** Closes the connection that has waited longest; false if none waits. */
  evict(handle: AcceptorHandle): boolean;
  /** Stops the thread; closes the listening socket and every waiting connection. */
  stop(handle: AcceptorHandle): void;
}

/** The accept addon, or why this process goes without it (runtime/native-addon.ts). */
export const acceptAddon = nativeAddon<AcceptAddon>('troupe_accept.node');
