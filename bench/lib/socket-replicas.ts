import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** One bench/baselines/socket-replica process and this process's socket to it. */
interface Replica {
  socket: Socket;
  /** Callers waiting for answers, in the order their frames were sent; given an error if the socket closes. */
  waiting: ((err?: Error) => void)[];
  stop: () => void;
}

async function startReplica(modelPath: string, inputName: string, row: number[], threads: number): Promise<Replica> {
  const script = fileURLToPath(new URL('../baselines/socket-replica.js', import.meta.url));
  const child = spawn(process.execPath, [script, modelPath, inputName, JSON.stringify(row), String(threads)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = () => void child.kill('SIGTERM');
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('socket-replica did not listen within 30 s')), 30_000);
    createInterface({ input: child.stdout }).on('line', (l) => l.startsWith('listening ') && (clearTimeout(timer), resolve(Number(l.slice(10)))));
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
  /** Sends `input` to every replica, which keeps it for the empty frames of `call()`. */
  hold(input: Float32Array): Promise<void>;
  stop(): void;
}

/**
 * `replicas` processes of bench/baselines/socket-replica.ts, each one onnxruntime session with
 * `threads` intra-op threads, driven from this process: the simplest way to serve a model from
 * processes of its own, next to the floor (no hop) and Troupe. With `hold`, then `call()`, the
 * inputs no longer cross the sockets: what serving the same load would give if images reached
 * the model's process without a copy through the kernel (shared memory).
 */
export async function socketReplicas(modelPath: string, inputName: string, row: number[], threads: number, replicas: number): Promise<SocketReplicas> {
  const started = await Promise.allSettled(Array.from({ length: replicas }, () => startReplica(modelPath, inputName, row, threads)));
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
  const send = (replica: Replica, input: Float32Array | undefined) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(input?.byteLength ?? 0);
    replica.socket.cork();
    replica.socket.write(length);
    if (input) replica.socket.write(new Uint8Array(input.buffer, input.byteOffset, input.byteLength));
    replica.socket.uncork();
    return new Promise<void>((resolve, reject) => replica.waiting.push((err) => (err ? reject(err) : resolve())));
  };
  return {
    call: (input) => send(all.reduce((a, b) => (b.waiting.length < a.waiting.length ? b : a)), input),
    hold: async (input) => void (await Promise.all(all.map((r) => send(r, input)))),
    stop,
  };
}
