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
 * A raw client of a replica's direct endpoint (`tcp://host:port`, length-prefixed frames) or of the
 * head's actor and client endpoints upgraded to the same framing, written apart from the runtime's
 * own reader so that a framing bug is not shared by both ends. It records every message the far
 * end sends, and whatever in them is not a proper answer.
 */
export class RawStream {
  readonly socket: Socket;
  readonly received: Record<string, unknown>[] = [];
  readonly problems: string[] = [];
  readonly opened: Promise<void>;
  readonly closed: Promise<void>;
  #open = false;
  #pending = Buffer.alloc(0);

  /**
   * `upgrade`: reach the stream through an HTTP upgrade (`Upgrade: troupe-frames`, as actors and
   * SDK clients reach the head) to `url`'s path, presenting `headers`; `opened` rejects with
   * `HTTP <status> <x-troupe-error>` when the server answers anything but 101.
   */
  constructor(url: string, allowed: readonly string[] = ['reply'], upgrade?: { headers: Record<string, string> }) {
    const { hostname, port, pathname } = new URL(url);
    this.socket = connect({ host: hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(port) });
    let switched = upgrade === undefined;
    let settle: { resolve: () => void; reject: (err: Error) => void };
    this.opened = new Promise((resolve, reject) => {
      settle = { resolve, reject };
      this.socket.once('error', reject);
    });
    this.socket.once('connect', () => {
      if (switched) return ((this.#open = true), settle.resolve());
      const lines = Object.entries(upgrade!.headers).map(([k, v]) => `${k}: ${v}\r\n`);
      this.socket.write(
        `GET ${pathname} HTTP/1.1\r\nhost: ${hostname}\r\nconnection: Upgrade\r\nupgrade: troupe-frames\r\n${lines.join('')}\r\n`,
      );
    });
    this.opened.catch(() => {});
    this.closed = new Promise((resolve) => this.socket.once('close', () => ((this.#open = false), resolve())));
    this.socket.on('error', () => {});
    this.socket.on('data', (chunk: Buffer) => {
      this.#pending = Buffer.concat([this.#pending, chunk]);
      if (!switched) {
        const end = this.#pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const response = this.#pending.subarray(0, end).toString('latin1');
        this.#pending = this.#pending.subarray(end + 4);
        const status = /^HTTP\/1\.1 (\d+)/.exec(response)?.[1];
        if (status !== '101' || !/^upgrade: troupe-frames$/im.test(response)) {
          const why = /^x-troupe-error: (.*)$/im.exec(response)?.[1] ?? '';
          settle.reject(new Error(`HTTP ${status} ${why}`.trim()));
          this.socket.destroy();
          return;
        }
        switched = true;
        this.#open = true;
        settle.resolve();
      }
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
