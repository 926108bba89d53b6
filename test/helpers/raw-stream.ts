import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { pack, recordAnswers } from './fuzz.js';

/** `bytes` as one frame of a length-prefixed stream (big-endian u32 length, then the bytes). */
export function lengthPrefixed(bytes: Uint8Array): Buffer {
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(bytes.length);
  return Buffer.concat([prefix, bytes]);
}

/**
 * A raw client of a replica's direct endpoint (`tcp://host:port`, length-prefixed frames), written
 * apart from the runtime's own reader so that a framing bug is not shared by both ends. It records
 * every message the replica sends, and whatever in them is not a proper answer.
 */
export class RawStream {
  readonly socket: Socket;
  readonly received: Record<string, unknown>[] = [];
  readonly problems: string[] = [];
  readonly opened: Promise<void>;
  readonly closed: Promise<void>;
  #open = false;
  #pending = Buffer.alloc(0);

  constructor(url: string, allowed: readonly string[] = ['reply']) {
    const { hostname, port } = new URL(url);
    this.socket = connect({ host: hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(port) });
    this.opened = new Promise((resolve, reject) => {
      this.socket.once('connect', () => ((this.#open = true), resolve()));
      this.socket.once('error', reject);
    });
    this.opened.catch(() => {});
    this.closed = new Promise((resolve) => this.socket.once('close', () => ((this.#open = false), resolve())));
    this.socket.on('error', () => {});
    this.socket.on('data', (chunk: Buffer) => {
      this.#pending = Buffer.concat([this.#pending, chunk]);
      while (this.#pending.length >= 4 && this.#pending.length >= 4 + this.#pending.readUInt32BE(0)) {
        const frame = this.#pending.subarray(4, 4 + this.#pending.readUInt32BE(0));
        this.#pending = this.#pending.subarray(4 + frame.length);
        recordAnswers(frame, 'the replica', allowed, this);
      }
    });
  }

  get open(): boolean {
    return this.#open;
  }

  /** Sends `bytes` as one frame. */
  send(bytes: Uint8Array): void {
    if (this.#open) this.socket.write(lengthPrefixed(bytes));
  }

  /** Sends bytes as they are, framing included (or broken). */
  sendRaw(bytes: Uint8Array): void {
    if (this.#open) this.socket.write(bytes);
  }

  /** The message answering `id`, waited for (bounded); undefined if the connection closed first. */
  async answerTo(id: string, timeoutMs = 10_000): Promise<Record<string, unknown> | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received.find((m) => m.id === id);
      if (found) return found;
      if (!this.#open) return undefined;
      if (Date.now() > deadline) throw new Error(`no answer to '${id}' within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Says hello with `token`; resolves with the replica's answer. */
  async hello(token: string): Promise<Record<string, unknown> | undefined> {
    this.send(pack([{ type: 'hello', id: 'hello', token }]));
    return this.answerTo('hello');
  }

  /** True when a probe (a message the replica must refuse, by id) was answered: it read everything before it. */
  async probe(id: string, timeoutMs = 15_000): Promise<boolean> {
    if (!this.#open) return false;
    this.send(pack([{ type: 'probe', id }]));
    return (await this.answerTo(id, timeoutMs)) !== undefined;
  }

  close(): void {
    this.socket.destroy();
  }
}
