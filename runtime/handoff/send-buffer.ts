import type { Socket } from 'node:net';
import { descriptorOf } from '../node-internals.js';
import { handoffAddon } from './addon.js';

/**
 * Fixes `socket`'s kernel send buffer at about `bytes` (the kernel's autotuning off), where the
 * handoff addon is built and the socket has a descriptor of its own (not a TLS one's, whose
 * records are paced in userland). Returns the size the kernel chose, or why nothing changed.
 *
 * For a stream the socket paces (head/http/sse.ts): what a paused reader holds back is the window
 * plus this buffer plus its own receive buffer, and an autotuned loopback send buffer grows to
 * megabytes.
 */
export function fixSendBuffer(socket: Socket, bytes: number): number | string {
  const addon = handoffAddon();
  if (typeof addon === 'string') return addon;
  const fd = descriptorOf(socket);
  if (fd === undefined) return 'the socket has no descriptor of its own';
  try {
    return addon.sendBuffer(fd, bytes);
  } catch (err) {
    return (err as Error).message;
  }
}
