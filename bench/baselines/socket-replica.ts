// The simplest model process that serves inputs sent from another process: one onnxruntime
// session behind a TCP socket speaking bare length-prefixed frames (big-endian u32, then the
// input's raw float32 bytes; the answer: the same prefix, then the first output's bytes), run in
// arrival order. No message encoding, validation, batching, routing or metrics. Several of these,
// one per core, driven by the benchmark's own process (bench/lib/socket-replicas.ts), show what
// moving images between processes costs with the load generator on the same cores. An empty frame
// runs the first input the replica was sent again (the image is then already in the model's
// process). Started with a shared-memory region (a memfd the driver holds, mapped with Troupe's
// addon, runtime/shm/; see bench/shared-memory.ts), a 4-byte frame names a slot of it instead: the
// row is read where the client wrote it.
// Usage: node socket-replica.js MODEL INPUT_NAME ROW_SHAPE_JSON THREADS [PID FD SLOTS]; prints "listening PORT".
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import ort from 'onnxruntime-node';
import { disableOrtTelemetryByDefault, sharedMemoryAddon } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const [modelPath, inputName, rowArg, threadsArg, pidArg, fdArg, slotsArg] = process.argv.slice(2);
if (!modelPath || !inputName || !rowArg || !threadsArg) {
  process.stderr.write('usage: socket-replica MODEL INPUT_NAME ROW_SHAPE_JSON THREADS [PID FD SLOTS]\n');
  process.exit(2);
}
const row = JSON.parse(rowArg) as number[];
const rowFloats = row.reduce((a, b) => a * b, 1);
const session = await ort.InferenceSession.create(modelPath, {
  graphOptimizationLevel: 'all',
  intraOpNumThreads: Number(threadsArg),
  interOpNumThreads: 1,
});
await session.run({ [inputName]: new ort.Tensor('float32', new Float32Array(rowFloats), [1, ...row]) });

/** The shared region's rows, one a slot, when started with one. */
function sharedRegion(): Float32Array | undefined {
  if (!pidArg) return undefined;
  const addon = sharedMemoryAddon();
  if (typeof addon === 'string') throw new Error(addon);
  return new Float32Array(addon.open(Number(pidArg), Number(fdArg), Number(slotsArg) * rowFloats * 4));
}
const region = sharedRegion();

/** The first rows this replica was sent, kept for the empty frames. */
let held: Float32Array | undefined;
/** A frame's rows, read in place; an empty frame: the first rows this replica was sent. */
const rowsOf = (frame: Buffer): Float32Array | undefined => {
  if (frame.length > 0) held ??= new Float32Array(frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.byteLength));
  return frame.length > 0 ? new Float32Array(frame.buffer, frame.byteOffset, frame.byteLength / 4) : held;
};

/** Runs each frame's rows in arrival order, one session.run at a time, and answers on the socket. */
const serve = (socket: Socket): void => {
  const frames: Buffer[] = [];
  /** Frames already run, kept to receive the next ones of the same size (as Troupe pools them). */
  const spare: Buffer[] = [];
  let running = false;
  const runAll = async () => {
    running = true;
    for (let frame = frames.shift(); frame; frame = frames.shift()) {
      const x = region && frame.length === 4 ? region.subarray(frame.readUInt32BE(0) * rowFloats).subarray(0, rowFloats) : rowsOf(frame);
      if (!x) {
        socket.destroy();
        return;
      }
      const out = await session.run({ [inputName]: new ort.Tensor('float32', x, [x.length / rowFloats, ...row]) });
      const y = Object.values(out)[0]!.data as Float32Array;
      const length = Buffer.alloc(4);
      length.writeUInt32BE(y.byteLength);
      socket.cork();
      socket.write(length);
      socket.write(new Uint8Array(y.buffer, y.byteOffset, y.byteLength));
      socket.uncork();
      if (frame.length > 0) spare.push(frame);
    }
    running = false;
  };
  // Each frame gathered into a buffer of its own (one copy of Node's 64 KB reads).
  const prefix = Buffer.alloc(4);
  let prefixFilled = 0;
  let frame: Buffer | undefined;
  let filled = 0;
  socket.on('data', (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (!frame) {
        const n = Math.min(4 - prefixFilled, chunk.length - at);
        chunk.copy(prefix, prefixFilled, at, at + n);
        prefixFilled += n;
        at += n;
        if (prefixFilled < 4) break;
        // A buffer of its own, so the floats are aligned and can be read in place.
        const length = prefix.readUInt32BE(0);
        frame = spare.length > 0 && spare.at(-1)!.length === length ? spare.pop()! : Buffer.from(new ArrayBuffer(length));
        prefixFilled = 0;
        filled = 0;
      }
      const n = Math.min(frame.length - filled, chunk.length - at);
      chunk.copy(frame, filled, at, at + n);
      filled += n;
      at += n;
      if (filled === frame.length) {
        frames.push(frame);
        frame = undefined;
      }
    }
    if (!running && frames.length > 0) void runAll();
  });
  socket.on('error', () => socket.destroy());
};

const server = createServer({ noDelay: true }, serve);
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => process.exit(0));
