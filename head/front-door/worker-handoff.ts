import type { Socket } from 'node:net';
import { handoffAddon, socketOverDescriptor } from '../../runtime/internal.js';
import type { HandoffAddon, Logger } from '../../runtime/internal.js';

/**
 * A front-door worker's end of the descriptor handoff (runtime/handoff/): the head queues each
 * connection it hands this worker on a Unix socket of their own, one `sendmsg` each, and says so
 * on the IPC channel. Node's own way, a socket sent with `process.send`, cost the head most of its
 * time under a burst of new connections (each send waits for the worker's acknowledgement before
 * the next, and each is written with a handle of its own), so a probe connecting in a burst waited
 * behind it. Where the addon cannot load, the head sends sockets Node's way, as before.
 */
export class WorkerHandoff {
  /** The abstract socket address the head connects to. */
  readonly name: string;
  readonly #addon: HandoffAddon;
  readonly #listening: number;
  readonly #log: Logger;
  #link = -1;

  private constructor(addon: HandoffAddon, name: string, log: Logger) {
    this.#addon = addon;
    this.name = name;
    this.#listening = addon.listen(name);
    this.#log = log;
  }

  /** The worker's end, or undefined (logged) where this process cannot take descriptors so. */
  static create(log: Logger): WorkerHandoff | undefined {
    const addon = handoffAddon();
    if (typeof addon === 'string') return void log.debug({ why: addon }, 'connections come with the IPC messages');
    try {
      return new WorkerHandoff(addon, `troupe-front-door-${process.pid}-${Math.random().toString(36).slice(2)}`, log);
    } catch (err) {
      return void log.warn({ err: (err as Error).message }, 'connections come with the IPC messages: cannot listen for the head');
    }
  }

  /** Takes the head's pending connection: only the head's pid may open it. */
  open(headPid: number): void {
    const link = this.#addon.accept(this.#listening, headPid);
    if (link < 0) return void this.#log.warn('handoffOpen: the head has not connected to the handoff socket');
    if (this.#link >= 0) this.#addon.close(this.#link);
    this.#link = link;
  }

  /** The next connection the head queued, not reading yet; undefined (logged) when none is. */
  take(): Socket | undefined {
    if (this.#link < 0) return void this.#log.warn('a connection was queued before the handoff opened');
    let fd: number;
    try {
      fd = this.#addon.receive(this.#link);
    } catch (err) {
      return void this.#log.warn({ err: (err as Error).message }, 'cannot take a queued connection');
    }
    if (fd < 0) return void this.#log.warn('the head said a connection was queued, and none was');
    return socketOverDescriptor(fd);
  }
}
