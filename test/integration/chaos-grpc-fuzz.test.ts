import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { status } from '@grpc/grpc-js';
import type { ServiceDefinition, ServiceError } from '@grpc/grpc-js';
import { after, before, describe, test } from 'node:test';
import { isAlive, waitFor } from '../helpers/cluster.js';
import { childrenRunning } from '../helpers/processes.js';
import { CHAOS_AUTH, FUZZ_SEED, rssOf, startChaosCluster } from '../helpers/chaos-cluster.js';
import type { ChaosCluster } from '../helpers/chaos-cluster.js';
import { Prng, mutateBytes } from '../helpers/fuzz.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import type { GrpcClient } from '../helpers/grpc-client.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * No gRPC input takes the head down (the HTTP and frame fuzzing: chaos-fuzz.test.ts): a seeded
 * PRNG (TROUPE_TEST_FUZZ_SEED replays a run) sends malformed protobuf bytes (random, and valid
 * requests mutated bytewise) to every method, and well-formed requests whose contents lie: raw
 * contents of the wrong size, huge and negative declared shapes, contents of the wrong type, BYTES
 * whose lengths run past their data. Each well-formed request is answered with a TROUPE_ERR_* code
 * and never INTERNAL (bytes that are no protobuf too); afterwards every process (the front-door
 * workers, which serve the gRPC connections, included) is the same one and a valid request succeeds.
 */

const METHODS = [
  'ServerLive',
  'ServerReady',
  'ModelReady',
  'ServerMetadata',
  'ModelMetadata',
  'ModelInfer',
  'ModelConfig',
  'ModelStatistics',
  'RepositoryIndex',
];

/** A call that sends `bytes` as the request message as they are, and reads the answer's bytes. */
function callRaw(grpc: GrpcClient, method: string, bytes: Buffer): Promise<ServiceError | undefined> {
  return new Promise((resolve) =>
    grpc.client.makeUnaryRequest(
      `/inference.GRPCInferenceService/${method}`,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      { deadline: Date.now() + 20_000 },
      (err) => resolve(err ?? undefined),
    ),
  );
}

/** Requests whose protobuf is well-formed and whose contents are wrong in one of the ways a client gets them wrong. */
function lyingRequest(r: Prng): Record<string, unknown> {
  const dims = () =>
    Array.from({ length: r.int(20) }, () =>
      r.pick(['0', '1', '64', '-1', '-9223372036854775808', '9223372036854775807', '4294967296', String(r.int(1e6))]),
    );
  const datatype = () => r.pick(['FP32', 'FP16', 'BYTES', 'INT64', 'UINT8', 'BOOL', 'INT8', 'FP64', 'fp32', '', 'BF16']);
  const input = (name = 'x') => ({ name, datatype: datatype(), shape: r.int(2) ? [String(1 + r.int(4)), '64'] : dims() });
  const contents = () =>
    r.pick([
      { fp32_contents: Array.from({ length: r.int(300) }, () => r.pick([0, 1.5, NaN, Infinity, -1e38])) },
      { int_contents: Array.from({ length: r.int(300) }, () => r.pick([0, -129, 300, 2 ** 31 - 1])) },
      { int64_contents: Array.from({ length: r.int(70) }, () => r.pick(['0', '-9223372036854775808', '18446744073709551615'])) },
      { bool_contents: Array.from({ length: r.int(70) }, () => r.int(2) === 1) },
      { bytes_contents: Array.from({ length: r.int(70) }, () => r.bytes(r.int(8))) },
      {},
    ]);
  const raw = () =>
    r.pick([
      rawFloats(seededFloats(64 * (1 + r.int(4)), r.int(1000))),
      r.bytes(r.int(1200)),
      // BYTES elements whose 4-byte length runs past the data.
      Buffer.from([255, 255, 255, 127, 1, 2]),
      Buffer.alloc(0),
    ]);
  const inputs = Array.from({ length: r.int(4) }, (_, i) => ({
    ...input(r.pick(['x', 'x', 'y', ''].slice(0, 3 + (i % 2)))),
    ...(r.int(2) ? { contents: contents() } : {}),
  }));
  return {
    model_name: r.pick(['mlp', 'mlp', 'mlp', 'mlp', 'nope', '', 'x'.repeat(300)]),
    model_version: r.pick(['', '', '1', '2']),
    id: r.pick(['', 'fz', 'ü'.repeat(10)]),
    inputs,
    raw_input_contents: r.int(2) ? Array.from({ length: r.int(4) }, raw) : [],
    outputs:
      r.int(3) === 0
        ? [
            {
              name: r.pick(['logits', 'nope', 'logits']),
              parameters: { classification: { int64_param: r.pick(['-1', '0', '3', '9223372036854775807']) } },
            },
          ]
        : [],
    parameters:
      r.int(3) === 0
        ? { timeout: r.pick([{ int64_param: '-5' }, { string_param: 'soon' }, { double_param: 0.5 }, { bool_param: true }]) }
        : {},
  };
}

describe('chaos: gRPC fuzzing', { timeout: 180_000 }, () => {
  let chaos: ChaosCluster;
  let grpc: GrpcClient;
  before(async () => {
    chaos = await startChaosCluster();
    grpc = grpcClient(chaos.cluster.grpcAddress);
  });
  after(async () => {
    grpc?.close();
    await chaos?.stop();
  });

  test(`a seeded fuzzer (seed ${FUZZ_SEED}): malformed protobufs and lying requests to every method; nothing exits, nothing is INTERNAL`, async () => {
    const r = new Prng(FUZZ_SEED);
    const { pids } = chaos;
    const rssBefore = await rssOf(pids.head);
    // The front-door workers serve the gRPC connections' inferences: they must survive too.
    const workers = await waitFor('the front-door workers', async () => {
      const running = await childrenRunning(pids.head, 'front-door/worker-main');
      return running.length > 0 && running;
    });
    const service = (grpc.client.constructor as unknown as { service: ServiceDefinition }).service;
    const serialize = (method: string, message: unknown) => service[method]!.requestSerialize(message);
    const valid = {
      model_name: 'mlp',
      inputs: [{ name: 'x', datatype: 'FP32', shape: ['1', '64'] }],
      raw_input_contents: [rawFloats(seededFloats(64, 1))],
    };

    // Malformed bytes: random ones, and valid requests mutated. Bytes that are no protobuf are
    // INVALID_ARGUMENT with TROUPE_ERR_BAD_REQUEST; bytes that decode to something are answered as it.
    let malformed = 0;
    for (let i = 0; i < 600; i++) {
      const method = r.pick(METHODS);
      const bytes =
        r.int(3) === 0 ? r.bytes(r.int(200)) : mutateBytes(r, serialize(method, method === 'ModelInfer' ? valid : { name: 'mlp' }));
      const err = await callRaw(grpc, method, bytes);
      if (!err) continue;
      assert.notEqual(err.code, status.INTERNAL, `${method}: ${err.details}`);
      assert.match(err.details, /^TROUPE_ERR_[A-Z_]+: /, err.details);
      if (err.details.includes('is not a valid')) malformed++;
    }
    assert.ok(malformed > 100, `many are not protobufs at all (${malformed})`);

    // Well-formed protobufs that lie: each answered with its TROUPE_ERR_* code (or a result), never INTERNAL.
    let refused = 0;
    for (let i = 0; i < 800; i++) {
      const request = lyingRequest(r);
      const outcome = await grpc.call('ModelInfer', request).then(
        () => undefined,
        (err: ServiceError) => err,
      );
      if (!outcome) continue;
      refused++;
      assert.notEqual(outcome.code, status.INTERNAL, `${outcome.details}\nrequest: ${JSON.stringify(request).slice(0, 600)}`);
      assert.notEqual(outcome.code, status.UNKNOWN, outcome.details);
      assert.match(outcome.details, /^TROUPE_ERR_[A-Z_]+: /, outcome.details);
    }
    assert.ok(refused > 600, `most lying requests are refused (${refused})`);

    // A stream fed the same: one answer per request, then a clean end.
    const stream = grpc.stream();
    let answers = 0;
    const ended = new Promise<void>((resolve, reject) => {
      stream.on('data', () => answers++);
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    for (let i = 0; i < 100; i++) stream.write(lyingRequest(r));
    stream.end();
    await ended;
    assert.equal(answers, 100);

    for (const pid of [pids.head, pids.agent, pids.actor, ...workers]) assert.ok(isAlive(pid), `process ${pid} is still up`);
    assert.deepEqual(await childrenRunning(pids.head, 'front-door/worker-main'), workers, 'no front-door worker was restarted');
    const answer = await grpc.call<{ raw_output_contents: Buffer[] }>('ModelInfer', valid);
    assert.equal(floatsOfRaw(answer.raw_output_contents[0]!).length, 10);
    const rssAfter = await rssOf(pids.head);
    assert.ok(rssAfter < rssBefore + 300 * 2 ** 20, `the head's memory stays bounded (${rssBefore} -> ${rssAfter} bytes)`);
  });

  test(`wide and large requests (seed ${FUZZ_SEED}) to every method: answered with a status, never INTERNAL; the head lives and answers /healthz`, async () => {
    const r = new Prng(FUZZ_SEED + 47);
    const { pids } = chaos;
    const many = <T>(n: number, each: (i: number) => T) => Array.from({ length: n }, (_, i) => each(i));
    const wideOrLarge = (): Record<string, unknown> => {
      const n = r.pick([1000, 20_000]);
      const big = 'x'.repeat(r.pick([4096, 300_000, 2_000_000]));
      return r.pick([
        { model_name: 'mlp', inputs: [{ name: 'x', datatype: 'FP32', shape: many(r.pick([17, 1000]), () => '1') }] },
        { model_name: 'mlp', inputs: many(n, (i) => ({ name: `x${i}`, datatype: 'FP32', shape: ['1', '64'] })) },
        { model_name: 'mlp', parameters: Object.fromEntries(many(n, (i) => [`p${i}`, { string_param: 'v' }])) },
        { model_name: 'mlp', parameters: { big: { string_param: big } } },
        { model_name: big.slice(0, 100_000) },
        { model_name: 'mlp', outputs: many(n, (i) => ({ name: `o${i}` })) },
        {
          model_name: 'mlp',
          inputs: [{ name: 'x', datatype: 'BYTES', shape: [String(n)], contents: { bytes_contents: many(n, () => Buffer.alloc(8)) } }],
        },
        {
          model_name: 'mlp',
          inputs: [{ name: 'x', datatype: 'FP32', shape: ['1', '64'] }],
          raw_input_contents: many(n, () => Buffer.alloc(8)),
        },
      ]);
    };
    const statuses = new Map<number, number>();
    for (let i = 0; i < 120; i++) {
      const method = r.pick(METHODS);
      const request = method === 'ModelInfer' || r.int(2) ? wideOrLarge() : { name: 'x'.repeat(r.pick([300, 300_000])) };
      const outcome = await grpc.call(method, request).then(
        () => undefined,
        (err: ServiceError) => err,
      );
      statuses.set(outcome?.code ?? 0, (statuses.get(outcome?.code ?? 0) ?? 0) + 1);
      if (!outcome) continue;
      assert.notEqual(outcome.code, status.INTERNAL, `${method}: ${outcome.details}`);
      assert.notEqual(outcome.code, status.UNKNOWN, `${method}: ${outcome.details}`);
      if (i % 20 === 19) assert.ok(isAlive(pids.head), 'the head is up');
    }
    assert.ok(isAlive(pids.head), 'the head is up');
    assert.equal((await fetch(`${chaos.cluster.url}/healthz`, { signal: AbortSignal.timeout(10_000) })).status, 200);
    process.stderr.write(`# gRPC wide and large (seed ${FUZZ_SEED + 47}): statuses ${JSON.stringify([...statuses])}\n`);
  });

  test('a message flagged compressed on a call that names no grpc-encoding is refused (INVALID_ARGUMENT), an unflagged one served', async () => {
    const session = http2.connect(`http://${chaos.cluster.grpcAddress}`);
    session.on('error', () => {});
    try {
      const call = (flag: number) =>
        new Promise<{ status: string | undefined; message: string | undefined }>((resolve, reject) => {
          const stream = session.request({
            ':method': 'POST',
            ':path': '/inference.GRPCInferenceService/ServerLive',
            'content-type': 'application/grpc',
            te: 'trailers',
            ...CHAOS_AUTH,
          });
          stream.on('error', reject);
          let headers: http2.IncomingHttpHeaders = {};
          stream.on('response', (h) => (headers = h));
          stream.on('trailers', (t) => (headers = { ...headers, ...t }));
          stream.on('data', () => {});
          stream.on('end', () =>
            resolve({ status: headers['grpc-status'] as string | undefined, message: headers['grpc-message'] as string | undefined }),
          );
          // An empty ServerLiveRequest: the flag byte, then a length of 0.
          stream.end(Buffer.from([flag, 0, 0, 0, 0]));
        });
      const flagged = await call(1);
      assert.equal(flagged.status, String(status.INVALID_ARGUMENT), JSON.stringify(flagged));
      assert.match(decodeURIComponent(flagged.message ?? ''), /TROUPE_ERR_BAD_REQUEST: a message is flagged compressed/);
      assert.equal((await call(0)).status, '0');
    } finally {
      session.close();
    }
  });
});
