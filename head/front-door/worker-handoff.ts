import { HandoffListener } from '../../runtime/internal.js';
import type { Logger } from '../../runtime/internal.js';

/**
 * A front-door worker's end of the descriptor handoff (runtime/handoff/): the head queues each
 * connection it hands this worker on a Unix socket of their own, one `sendmsg` each, and says so
 * on the IPC channel. Node's own way, a socket sent with `process.send`, cost the head most of its
 * time under a burst of new connections (each send waits for the worker's acknowledgement before
 * the next, and each is written with a handle of its own), so a probe connecting in a burst waited
 * behind it. Where the addon cannot load, the head sends sockets Node's way, as before: undefined.
 */
export function workerHandoff(log: Logger): HandoffListener | undefined {
  const handoff = HandoffListener.create('troupe-front-door', log);
  if (typeof handoff !== 'string') return handoff;
  log.debug({ why: handoff }, 'connections come with the IPC messages');
  return undefined;
}

/** Takes the head's connection to `handoff` at its `handoffOpen`; a refusal (none pending, or another process's) is logged, and connections then come with the IPC messages. */
export function openWorkerHandoff(handoff: HandoffListener | undefined, headPid: number, log: Logger): void {
  try {
    if (handoff && !handoff.open(headPid)) log.warn('handoffOpen: the head has not connected to the handoff socket');
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'handoffOpen: refused the connection to the handoff socket');
  }
}
