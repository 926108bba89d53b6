// Three servers that answer every request at once with 64 bytes, reading the body and nothing
// more: Node's HTTP/1.1 server, Node's HTTP/2 server (gRPC's framing, no grpc-js), and a grpc-js
// unary method with no decoding. What receiving a request costs each protocol stack, before any
// model: bench/front-door-receive.ts measures this process's CPU under h2load's load.
// Usage: node receive-servers.js GRPC_PATH; prints "listening HTTP1_PORT HTTP2_PORT GRPC_PORT".
import { createServer as createHttp1Server } from 'node:http';
import { createServer as createHttp2Server } from 'node:http2';
import type { AddressInfo, Server } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { grpcFrame } from '../lib/h2load-grpc.js';

/** The gRPC method's path ('/package.Service/Method'); the HTTP servers answer any path. */
const path = process.argv[2];
if (!path?.startsWith('/')) {
  process.stderr.write('usage: receive-servers GRPC_PATH\n');
  process.exit(2);
}
const ANSWER = Buffer.alloc(64, 1);
const identity = (b: Buffer) => b;

async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

const http1 = createHttp1Server((req, res) => {
  req.on('data', () => {});
  req.on('end', () => res.end(ANSWER));
});

const http2 = createHttp2Server();
http2.on('stream', (stream) => {
  stream.on('error', () => {});
  stream.on('data', () => {});
  stream.on('end', () => {
    if (stream.destroyed) return;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(grpcFrame(ANSWER));
  });
});

const rpc = new grpc.Server({ 'grpc.max_receive_message_length': 64 << 20 });
rpc.addService(
  {
    Infer: {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  },
  { Infer: (_call: unknown, done: grpc.sendUnaryData<Buffer>) => done(null, ANSWER) },
);
const rpcPort = await new Promise<number>((resolve, reject) =>
  rpc.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
);

process.stdout.write(`listening ${await listening(http1)} ${await listening(http2)} ${rpcPort}\n`);
