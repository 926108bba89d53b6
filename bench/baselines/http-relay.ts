// The least an HTTP server can do when the model runs in another process (as in Troupe, where
// actors are processes of their own): forward each body over one WebSocket to a process holding
// the session, and answer with its reply. No validation, batching, routing or metrics: a floor
// for the design, next to plain-http-server.ts, the floor for any Node server.
// Usage: node http-relay.js MODEL INPUT_NAME FEATURES [THREADS]; prints "listening PORT".
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import ort from 'onnxruntime-node';
import { WebSocket, WebSocketServer } from 'ws';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const [modelPath, inputName, featuresArg, threadsArg, role] = process.argv.slice(2);
if (!modelPath || !inputName || !featuresArg) {
  process.stderr.write('usage: http-relay MODEL INPUT_NAME FEATURES [THREADS]\n');
  process.exit(2);
}
const features = Number(featuresArg);

if (role === 'model') {
  // The model process: one session, one call at a time, in arrival order.
  const session = await ort.InferenceSession.create(
    modelPath,
    threadsArg ? { intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1 } : {},
  );
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  wss.on('listening', () => process.send?.((wss.address() as AddressInfo).port));
  wss.on('connection', (socket) =>
    socket.on('message', (data: Buffer) => {
      const x = new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
      void session.run({ [inputName]: new ort.Tensor('float32', x, [x.length / features, features]) }).then((out) => {
        const y = Object.values(out)[0]!.data as Float32Array;
        socket.send(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
      });
    }),
  );
  process.on('disconnect', () => process.exit(0));
} else {
  const model = fork(new URL(import.meta.url).pathname, [modelPath, inputName, featuresArg, threadsArg ?? '1', 'model']);
  const port = await new Promise<number>((resolve) => model.once('message', (p) => resolve(p as number)));
  const ws = new WebSocket(`ws://127.0.0.1:${port}`);
  await new Promise((resolve) => ws.once('open', resolve));
  const waiting: ((reply: Buffer) => void)[] = [];
  ws.on('message', (reply: Buffer) => waiting.shift()?.(reply));
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      waiting.push((reply) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(reply);
      });
      ws.send(Buffer.concat(chunks));
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`));
  process.on('SIGTERM', () => {
    model.kill('SIGTERM');
    process.exit(0);
  });
}
