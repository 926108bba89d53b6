import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { SharedMemoryAddon } from '../../runtime/internal.js';

/** One bench/baselines/socket-replica process and this process's socket to it. */
interface Replica {
  socket: Socket;
  /** Callers waiting for answers, in the order their frames were sent; given an error if the socket closes. */
  waiting: ((err?: Error) => void)[];
  stop: () => void;
  /** With shared memory: the region's rows, and its slots not holding a call's input. */
  region?: Float32Array;
  freeSlots?: number[];
}

/** Inputs written into shared memory (memfds this process holds) the replicas map, `slots` rows per replica. */
export interface SharedInputs {
  addon: SharedMemoryAddon;
  slots: number;
}

async function startReplica(
  modelPath: string,
  inputName: string,
  row: number[],
  threads: number,
  regionFd?: number,
  slots?: number,
): Promise<Replica> {
  const script = fileURLToPath(new URL('../baselines/socket-replica.js', import.meta.url));
  const args = [
    script,
    modelPath,
    inputName,
    JSON.stringify(row),
    String(threads),
    ...(regionFd !== undefined ? [String(process.pid), String(regionFd), String(slots)] : []),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = () => void child.kill('SIGTERM');
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('socket-replica did not listen within 30 s')), 30_000);
    createInterface({ input: child.stdout }).on(
      'line',
      (l) => l.startsWith('listening ') && (clearTimeout(timer), resolve(Number(l.slice(10)))),
    );
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`socket-replica exited (${code})`))));
  }).catch((err: unknown) => (stop(), Promise.reject(err)));
  const socket = connect({ host: '127.0.0.1', port, noDelay: true });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const replica: Replica = { socket, waiting: [], stop };
  // Answers are small: gathered, then counted off by their length prefixes.
  let pending: Buffer = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
      pending = pending.subarray(4 + pending.readUInt32BE(0));
      replica.waiting.shift()?.();
    }
  });
  socket.on('error', () => {});
  socket.on('close', () => {
    for (const answer of replica.waiting.splice(0)) answer(new Error('the socket-replica connection closed'));
  });
  return replica;
}

export interface SocketReplicas {
  /** Sends `input` to the replica with the fewest unanswered frames; without it, an empty frame: run the input it holds. */
  call(input?: Float32Array): Promise<void>;
  /** Sends `input` to every replica, which keeps it for the empty frames of `call()` (without shared memory). */
  hold(input: Float32Array): Promise<void>;
  stop(): void;
}

/**
 * `replicas` processes of bench/baselines/socket-replica.ts, each one onnxruntime session with
 * `threads` intra-op threads, driven from this process: the simplest way to serve a model from
 * processes of its own, next to the floor (no hop) and Troupe. With `hold`, then `call()`, the
 * inputs no longer cross the sockets: what serving the same load would give if images reached
 * the model's process without a copy through the kernel. With `shared` (bench/shared-memory.ts),
 * `call(input)` copies the input into a shared-memory slot the replica reads it from, and sends
 * only the slot's number: that design change, measured.
 */
export async function socketReplicas(
  modelPath: string,
  inputName: string,
  row: number[],
  threads: number,
  replicas: number,
  shared?: SharedInputs,
): Promise<SocketReplicas> {
  const rowFloats = row.reduce((a, b) => a * b, 1);
  // Each replica's region is made here, before the replica maps it.
  const regions = shared ? Array.from({ length: replicas }, () => shared.addon.create(shared.slots * rowFloats * 4)) : [];
  const views = regions.map((region) => new Float32Array(region.buffer));
  const started = await Promise.allSettled(
    Array.from({ length: replicas }, (_, i) => startReplica(modelPath, inputName, row, threads, regions[i]?.fd, shared?.slots)),
  );
  const all = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = () => {
    for (const r of all) {
      r.socket.destroy();
      r.stop();
    }
  };
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    stop();
    throw failed.reason;
  }
  if (shared)
    all.forEach((r, i) => Object.assign(r, { region: views[i], freeSlots: Array.from({ length: shared.slots }, (_, slot) => slot) }));
  const send = (replica: Replica, input: Float32Array | undefined) => {
    // With shared memory, the input is written into a free slot and the frame names the slot.
    const slot = input && replica.freeSlots ? replica.freeSlots.pop() : undefined;
    if (input && replica.freeSlots && slot === undefined)
      return Promise.reject(new Error('every shared-memory slot holds a call: raise slots'));
    let payload = input && new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    if (slot !== undefined) {
      replica.region!.set(input!, slot * rowFloats);
      payload = new Uint8Array(4);
      new DataView(payload.buffer).setUint32(0, slot);
    }
    const length = Buffer.alloc(4);
    length.writeUInt32BE(payload?.byteLength ?? 0);
    replica.socket.cork();
    replica.socket.write(length);
    if (payload) replica.socket.write(payload);
    replica.socket.uncork();
    return new Promise<void>((resolve, reject) =>
      replica.waiting.push((err) => {
        if (slot !== undefined) replica.freeSlots!.push(slot);
        if (err) reject(err);
        else resolve();
      }),
    );
  };
  return {
    call: (input) =>
      send(
        all.reduce((a, b) => (b.waiting.length < a.waiting.length ? b : a)),
        input,
      ),
    hold: async (input) => void (await Promise.all(all.map((r) => send(r, input)))),
    stop,
  };
}
