import type { Socket } from 'node:net';
import type { Logger } from '../log.js';
import { socketOverDescriptor } from '../node-internals.js';
import { handoffAddon } from './addon.js';
import type { HandoffAddon } from './addon.js';

/**
 * A process's end of the head's descriptor handoff (a replica's HTTP door, a front-door worker's):
 * it listens at a random abstract socket address it tells the head, takes the head's connection
 * there (only the head's pid may open it), then takes each client connection the head queues on it,
 * one descriptor per `sendmsg`, and may queue one back.
 */
export class HandoffListener {
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

  /** A listener named after `prefix`, or why this process cannot take descriptors (no addon, cannot listen). */
  static create(prefix: string, log: Logger): HandoffListener | string {
    const addon = handoffAddon();
    if (typeof addon === 'string') return addon;
    try {
      return new HandoffListener(addon, `${prefix}-${process.pid}-${Math.random().toString(36).slice(2)}`, log);
    } catch (err) {
      return `cannot listen for the head: ${(err as Error).message}`;
    }
  }

  /** Takes the head's pending connection (a new head's replaces an old one's); false when none is pending. Throws when another process's is. */
  open(headPid: number): boolean {
    const link = this.#addon.accept(this.#listening, headPid);
    if (link < 0) return false;
    if (this.#link >= 0) this.#addon.close(this.#link);
    this.#link = link;
    return true;
  }

  /** The next connection the head queued, not reading yet; undefined (logged) when none is. */
  take(): Socket | undefined {
    if (this.#link < 0) return void this.#log.warn('a connection was handed over before the handoff opened');
    let fd: number;
    try {
      fd = this.#addon.receive(this.#link);
    } catch (err) {
      return void this.#log.warn({ err: (err as Error).message }, 'cannot take a handed-over connection');
    }
    if (fd < 0) return void this.#log.warn('the head said a connection was handed over, and none was');
    return socketOverDescriptor(fd);
  }

  /** Queues `fd` for the head; false when the handoff is not open or its queue is full. Throws when the socket failed. */
  send(fd: number): boolean {
    return this.#link >= 0 && this.#addon.send(this.#link, fd);
  }
}
