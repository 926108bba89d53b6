import { nativeAddon } from '../native-addon.js';

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
  /** Fixes the socket's kernel send buffer (SO_SNDBUF); the size the kernel chose. */
  sendBuffer(fd: number, bytes: number): number;
}

/**
 * The handoff addon, or why this process goes without it (see runtime/native-addon.ts). Without
 * it, the head's front-door workers serve every HTTP connection, as they do for replicas on other
 * hosts.
 */
export const handoffAddon = nativeAddon<HandoffAddon>('troupe_handoff.node');
