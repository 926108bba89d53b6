// The simplest possible Node HTTP server around one onnxruntime session: the floor for any Node
// server. POST raw little-endian float32 bytes of one [1, F] row; the answer is the output's bytes.
// Usage: node plain-http-server.js MODEL INPUT_NAME FEATURES [THREADS]; prints "listening PORT".
import { createServer } from 'node:http';
import ort from 'onnxruntime-node';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const [modelPath, inputName, featuresArg, threadsArg] = process.argv.slice(2);
if (!modelPath || !inputName || !featuresArg) {
  process.stderr.write('usage: plain-http-server MODEL INPUT_NAME FEATURES [THREADS]\n');
  process.exit(2);
}
const features = Number(featuresArg);
const session = await ort.InferenceSession.create(
  modelPath,
  threadsArg ? { intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1 } : {},
);
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const x = new Float32Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
    session.run({ [inputName]: new ort.Tensor('float32', x, [x.length / features, features]) }).then(
      (out) => {
        const y = Object.values(out)[0]!.data as Float32Array;
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
      },
      (err: Error) => {
        res.writeHead(400);
        res.end(err.message);
      },
    );
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => process.exit(0));
