import { Packr } from 'msgpackr';
import { WebSocket } from 'ws';
import { ERROR_CODES, decodeFrame } from '../../runtime/internal.js';

/** mulberry32: a small seeded PRNG, so a failing fuzz run replays exactly. */
export class Prng {
  #s: number;

  constructor(seed: number) {
    this.#s = seed >>> 0;
  }

  next(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }
}

// Strings the fuzzer may put anywhere. Never the name of a deployment the test relies on.
const WORDS = [
  'run',
  'reply',
  'fail',
  'deploy',
  'describe',
  'register',
  'heartbeat',
  'stats',
  'x',
  'inputs',
  'float32',
  'string',
  'fz',
  '',
  '__proto__',
  'constructor',
  '../../etc/passwd',
  '%00',
  'ü',
  'a'.repeat(300),
];
const NUMBERS = [0, -1, 1, 1.5, NaN, Infinity, -Infinity, 2 ** 31, 2 ** 53, -(2 ** 53), 1e300, Number.MIN_VALUE];

/** Sets an own property, even one named `__proto__` (plain assignment would set the prototype). */
function setKey(o: object, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A random value of the kinds msgpack carries, nested at most `depth` deep. */
export function randomValue(r: Prng, depth = 3): unknown {
  switch (r.int(depth > 0 ? 9 : 6)) {
    case 0:
      return r.pick(NUMBERS);
    case 1:
      return r.int(2 ** 32) - 2 ** 31;
    case 2:
      return r.pick(WORDS);
    case 3:
      return r.bytes(r.int(64));
    case 4:
      return r.pick([null, true, false, undefined]);
    case 5:
      return r.next() < 0.5 ? BigInt(r.int(2 ** 22)) * 2n ** 40n : new Date(r.int(2 ** 40));
    case 6:
      return Array.from({ length: r.int(5) }, () => randomValue(r, depth - 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(5); i > 0; i--) setKey(o, r.pick(WORDS), randomValue(r, depth - 1));
      return o;
    }
  }
}

/** A random JSON text (BigInts as numbers, bytes as objects, as JSON.stringify writes them). */
export function randomJson(r: Prng): string {
  return JSON.stringify(randomValue(r), (_key, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)) ?? 'null';
}

/** A copy of `value` with one field somewhere replaced, removed or added (type confusion, unknown fields). */
export function mutateValue(r: Prng, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || value instanceof Uint8Array) return r.next() < 0.5 ? randomValue(r, 2) : value;
  const copy: Record<string, unknown> | unknown[] = Array.isArray(value) ? [...value] : { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const action = r.int(4);
  if (action === 0 || keys.length === 0) setKey(copy, r.pick(WORDS) || 'extra', randomValue(r, 2));
  else {
    const key = r.pick(keys);
    const rec = copy as Record<string, unknown>;
    if (action === 1) delete rec[key];
    else if (action === 2) setKey(rec, key, randomValue(r, 2));
    else setKey(rec, key, mutateValue(r, rec[key]));
  }
  return copy;
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/** msgpack of `value`; a value msgpackr itself cannot write (a key named 'constructor' can confuse it) packs as nil. */
export function pack(value: unknown): Buffer {
  try {
    return packr.pack(value);
  } catch {
    return packr.pack(null);
  }
}

/** A byte-level mutation of `bytes`: flips, truncation, a duplicated slice, inserted noise. */
export function mutateBytes(r: Prng, bytes: Buffer): Buffer {
  const b = Buffer.from(bytes);
  switch (r.int(4)) {
    case 0:
      for (let i = 1 + r.int(4); i > 0 && b.length > 0; i--) b[r.int(b.length)] = r.int(256);
      return b;
    case 1:
      return b.subarray(0, r.int(b.length + 1));
    case 2: {
      const at = r.int(b.length + 1);
      return Buffer.concat([b.subarray(0, at), b.subarray(r.int(b.length + 1)), b.subarray(at)]);
    }
    default: {
      const at = r.int(b.length + 1);
      return Buffer.concat([b.subarray(0, at), r.bytes(1 + r.int(16)), b.subarray(at)]);
    }
  }
}

/** One fuzzed frame: random bytes, a random msgpack value, or a template mutated structurally or bytewise. */
export function fuzzFrame(r: Prng, templates: readonly unknown[]): { data: Buffer | string; binary: boolean } {
  const template = r.pick(templates);
  switch (r.int(6)) {
    case 0:
      return { data: r.bytes(r.int(256)), binary: true };
    case 1:
      return { data: pack(randomValue(r)), binary: true };
    case 2:
      return { data: pack([mutateValue(r, template)]), binary: true };
    case 3:
      return { data: pack([mutateValue(r, mutateValue(r, template))]), binary: true };
    case 4:
      return { data: mutateBytes(r, pack([template])), binary: true };
    default:
      // Text frames, some not even valid UTF-8 (the socket may be closed with 1007 for those).
      return r.next() < 0.5 ? { data: JSON.stringify([template]), binary: false } : { data: r.bytes(r.int(64)), binary: false };
  }
}

/** A problem with something the head sent, or undefined when it is a proper answer. */
export function checkAnswer(message: unknown, allowed: readonly string[]): string | undefined {
  const m = message as { type?: unknown; id?: unknown; error?: { code?: unknown; message?: unknown } } | null;
  if (!m || typeof m.type !== 'string') return `not a message: ${JSON.stringify(message)?.slice(0, 200)}`;
  if (m.type === 'fail') {
    if (!ERROR_CODES.includes(m.error?.code as never)) return `fail without a TROUPE_ERR_* code: ${JSON.stringify(m).slice(0, 200)}`;
    if (typeof m.error?.message !== 'string') return 'fail without a message';
    if (m.error.code === 'TROUPE_ERR_INTERNAL') return `internal error: ${m.error.message}`;
    return undefined;
  }
  return allowed.includes(m.type) ? undefined : `unexpected message type '${m.type}'`;
}

/**
 * Decodes a frame a peer sent into `into.received`, and whatever in it is not a proper answer
 * (see {@link checkAnswer}) into `into.problems`.
 */
export function recordAnswers(
  frame: Uint8Array,
  peer: string,
  allowed: readonly string[],
  into: { received: unknown[]; problems: string[] },
): void {
  let messages: unknown[];
  try {
    messages = decodeFrame(frame);
  } catch (err) {
    into.problems.push(`undecodable frame from ${peer}: ${(err as Error).message}`);
    return;
  }
  for (const m of messages) {
    into.received.push(m);
    const problem = checkAnswer(m, allowed);
    if (problem) into.problems.push(problem);
  }
}

/**
 * A raw WebSocket that records everything the head sends and how it closed. `probe` sends a
 * frame that must be answered with a fail carrying the probe's id, and waits for it (bounded): the
 * head read everything sent before it.
 */
export class RawSocket {
  readonly ws: WebSocket;
  readonly received: unknown[] = [];
  readonly problems: string[] = [];
  closeCode: number | undefined;
  readonly opened: Promise<void>;
  readonly closed: Promise<void>;

  constructor(url: string, headers: Record<string, string>, allowed: readonly string[]) {
    this.ws = new WebSocket(url, { headers, perMessageDeflate: false });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
      this.ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    this.opened.catch(() => {});
    this.closed = new Promise((resolve) => this.ws.once('close', (code) => ((this.closeCode = code), resolve())));
    this.ws.on('error', () => {});
    this.ws.on('message', (data: Buffer) => recordAnswers(data, 'the head', allowed, this));
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(data: Buffer | string, binary: boolean): void {
    if (this.open) this.ws.send(data, { binary });
  }

  /** True when the probe was answered; false when the socket closed first. */
  async probe(id: string, timeoutMs = 15_000): Promise<boolean> {
    if (!this.open) return false;
    this.ws.send(pack([{ type: 'probe', id }]), { binary: true });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.received.some((m) => (m as { id?: unknown }).id === id)) return true;
      if (!this.open) return false;
      if (Date.now() > deadline) throw new Error(`the head did not answer probe ${id} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  close(): void {
    this.ws.terminate();
  }
}

/**
 * JSON text of a value built to hurt a parser or encoder: nested thousands deep (arrays or
 * objects), wide (a hundred thousand members), or large (one long string), written as text so
 * that no recursion of this process builds it.
 */
export function hostileJson(r: Prng): string {
  switch (r.int(3)) {
    case 0: {
      const depth = r.pick([65, 200, 1500, 10_000, 100_000]);
      return r.int(2) ? `${'['.repeat(depth)}"a"${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    }
    case 1: {
      const n = r.pick([1000, 50_000, 200_000]);
      return r.int(2) ? `[${'0,'.repeat(n - 1)}0]` : `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}}`;
    }
    default:
      return JSON.stringify('x'.repeat(r.pick([1024, 300_000, 2_000_000])));
  }
}

/** msgpack of `message` with its `args` replaced by one argument nested `depth` arrays deep, written as bytes. */
export function packWithDeepArgument(message: Record<string, unknown>, depth: number): Buffer {
  const marker = 'DEEP-ARGUMENT-HERE';
  const frame = pack([{ ...message, args: [marker] }]);
  const at = frame.indexOf(Buffer.from(marker));
  const deep = Buffer.concat([Buffer.alloc(depth, 0x91), Buffer.from([0xa1, 0x61])]);
  return Buffer.concat([frame.subarray(0, at - 1), deep, frame.subarray(at + marker.length)]);
}
