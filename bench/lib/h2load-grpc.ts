import { connect } from 'node:http2';
import { h2load } from './h2load.js';
import type { LoadResult } from './load.js';

/**
 * gRPC load from h2load (h2load.ts): one pre-encoded ModelInfer message sent again and again,
 * `concurrency` streams in flight on one HTTP/2 connection (as a gRPC channel multiplexes its
 * calls), so the figure measures the server and not a JavaScript client's encoding. h2load knows
 * HTTP, not gRPC: it cannot see grpc-status (a trailer), so `verifyGrpcAnswers` checks a sample of
 * answers to the same bytes first, over Node's own HTTP/2 client.
 */

export const SERVICE_PATH = '/inference.GRPCInferenceService/ModelInfer';

/** A protobuf message in gRPC's length-prefixed framing: uncompressed flag, 4-byte big-endian length, the bytes. */
export function grpcFrame(message: Buffer): Buffer {
  const framed = Buffer.alloc(5 + message.length);
  framed.writeUInt32BE(message.length, 1);
  message.copy(framed, 5);
  return framed;
}

/** Sends `framed` `sample` times and hands each answer's message bytes to `check`; throws unless every one is grpc-status 0. */
export async function verifyGrpcAnswers(address: string, framed: Buffer, check: (message: Buffer) => void, sample = 20): Promise<void> {
  const session = connect(`http://${address}`);
  try {
    for (let i = 0; i < sample; i++) {
      const { body, status, message } = await new Promise<{ body: Buffer; status: string | undefined; message: string | undefined }>(
        (resolve, reject) => {
          const stream = session.request({ ':method': 'POST', ':path': SERVICE_PATH, 'content-type': 'application/grpc', te: 'trailers' });
          const chunks: Buffer[] = [];
          let trailers: Record<string, unknown> = {};
          stream.on('trailers', (t) => (trailers = t));
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', reject);
          stream.on('end', () =>
            resolve({
              body: Buffer.concat(chunks),
              status: trailers['grpc-status'] as string | undefined,
              message: trailers['grpc-message'] as string | undefined,
            }),
          );
          stream.end(framed);
        },
      );
      if (status !== '0') throw new Error(`h2load's request is answered grpc-status ${status}: ${decodeURIComponent(message ?? '')}`);
      if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5)
        throw new Error(`an answer of ${body.length} bytes is not one gRPC message`);
      check(body.subarray(5));
    }
  } finally {
    session.close();
  }
}

/** Closed-loop gRPC load with h2load: `concurrency` streams in flight on one HTTP/2 connection. */
export function h2loadGrpc(address: string, framed: Buffer, concurrency: number, seconds: number): Promise<LoadResult> {
  const headers = { 'content-type': 'application/grpc', te: 'trailers' };
  return h2load({ url: `http://${address}${SERVICE_PATH}`, body: framed, headers, http1: false }, concurrency, seconds);
}
