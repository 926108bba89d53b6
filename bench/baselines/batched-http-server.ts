// The simplest Node HTTP server around one onnxruntime session, with the batching Troupe's replicas
// use: a request that finds the session idle runs at once; requests that arrive while it runs form
// the next batch (up to MAX_ROWS rows, one session.run), split back by rows. One process, no
// protocol: the fair baseline for Troupe with batching on (issue 40), beside the unbatched one
// (plain-http-server.ts). POST raw little-endian float32 bytes of [1, F] rows; the answer is the
// output's bytes. Usage: node batched-http-server.js MODEL INPUT_NAME FEATURES [THREADS]; prints "listening PORT".
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import ort from 'onnxruntime-node';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

/** The batching window Troupe's benchmarks give the MLP (batch maxSize 64). */
const MAX_ROWS = 64;

const [modelPath, inputName, featuresArg, threadsArg] = process.argv.slice(2);
if (!modelPath || !inputName || !featuresArg) {
  process.stderr.write('usage: batched-http-server MODEL INPUT_NAME FEATURES [THREADS]\n');
  process.exit(2);
}
const features = Number(featuresArg);
const session = await ort.InferenceSession.create(
  modelPath,
  threadsArg ? { intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1 } : {},
);

interface Waiting {
  rows: Float32Array;
  res: ServerResponse;
}
const queue: Waiting[] = [];
let running = false;

function runBatch(): void {
  if (running || queue.length === 0) return;
  const batch: Waiting[] = [];
  let rows = 0;
  while (queue.length > 0 && rows + queue[0]!.rows.length / features <= MAX_ROWS) {
    const next = queue.shift()!;
    batch.push(next);
    rows += next.rows.length / features;
  }
  if (batch.length === 0) batch.push(queue.shift()!);
  const x = new Float32Array(batch.reduce((n, w) => n + w.rows.length, 0));
  let at = 0;
  for (const w of batch) {
    x.set(w.rows, at);
    at += w.rows.length;
  }
  running = true;
  session.run({ [inputName!]: new ort.Tensor('float32', x, [x.length / features, features]) }).then(
    (out) => {
      const y = Object.values(out)[0]!.data as Float32Array;
      const width = y.length / (x.length / features);
      let row = 0;
      for (const w of batch) {
        const n = w.rows.length / features;
        const part = y.subarray(row * width, (row + n) * width);
        row += n;
        w.res.writeHead(200, { 'content-type': 'application/octet-stream' });
        w.res.end(Buffer.from(part.buffer, part.byteOffset, part.byteLength));
      }
      running = false;
      runBatch();
    },
    (err: Error) => {
      for (const w of batch) {
        w.res.writeHead(400);
        w.res.end(err.message);
      }
      running = false;
      runBatch();
    },
  );
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    queue.push({ rows: new Float32Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength)), res });
    runBatch();
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => process.exit(0));
