import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tensor } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { assertClose } from '../helpers/mlp-oip.js';
import { clientsMissing, perfAnalyzer, runClientScript } from '../helpers/python-clients.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * The clients Triton and KServe users already have, unmodified, against a real cluster: Triton's
 * tritonclient (HTTP and gRPC, sync and asyncio), KServe's InferenceRESTClient and
 * InferenceGRPCClient, and Triton's perf_analyzer over HTTP and gRPC. They come pinned from
 * .venv-clients/ (scripts/python-clients.sh; .ci/run installs it), found by path only; where that
 * folder is absent the suite is skipped, saying so. test/helpers/triton-client.ts rebuilds the
 * HTTP client's requests without Python (http-triton-client.test.ts); grpc-python.test.ts calls
 * stubs compiled from proto/ with Debian's grpcio. Here the real clients check what those cannot:
 * that the client libraries themselves accept every answer.
 */

const ROWS = 2;
const X = seededFloats(ROWS * 64, 45);

type Logits = number[][];
interface TritonSide {
  live: boolean;
  ready: boolean;
  model_ready: boolean;
  server: string;
  extensions: string[];
  inputs: { name: string; datatype: string; shape: number[] }[];
  config: { name: string; platform: string };
  repository: string[];
  stats_models: string[];
  stats_success: number;
  binary: { id: string; logits: Logits };
  async: (Logits | string)[];
  shared_memory: Record<'register_system' | 'status_system' | 'register_cuda', { status: string; message: string } | null>;
}
interface TritonOut {
  http: TritonSide & { aio: Logits[] };
  grpc: TritonSide & {
    stream: { id?: string; logits?: Logits; error?: string }[];
    aio: { infer: Logits[]; stream: { id?: string; logits?: Logits; error?: string }[] };
  };
}
interface KServeSide {
  live: boolean;
  ready: boolean;
  model_ready: boolean;
  binary: { id: string; logits: Logits };
}
interface KServeOut {
  rest: KServeSide & { json: { id: string; logits: Logits }; missing: { status: number; body: { error: string; code: string } } | null };
  grpc: KServeSide & { typed: { id: string; logits: Logits }; missing: { code: string; details: string } | null };
}

describe("Triton's and KServe's Python clients and perf_analyzer against a cluster", { timeout: 300_000, skip: clientsMissing }, () => {
  let cluster: TestCluster;
  let work: string;
  let input: string;
  let expected: Float32Array;
  const close = (logits: Logits | string | undefined, what: string) => {
    assert.ok(Array.isArray(logits), `${what}: ${String(logits)}`);
    assert.deepEqual([logits.length, logits[0]?.length], [ROWS, 10], what);
    assertClose(logits.flat(), expected, what);
  };

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'troupe-python-clients-'));
    input = join(work, 'x.f32');
    await writeFile(input, Buffer.from(X.buffer, X.byteOffset, X.byteLength));
    cluster = await startCluster();
    // As a user first deploys (no batching: max_batch_size 0), and with batching (max_batch_size 16).
    for (const [name, spec] of [
      ['mlp', { model: 'mlp.onnx', threads: 1 }],
      ['mlp-batched', { model: 'mlp.onnx', threads: 1, batch: { maxSize: 16 } }],
    ] as const) {
      const put = await call(cluster.url, 'PUT', `/api/v1/deployments/${name}`, {
        body: JSON.stringify(spec),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(put.status, 201, put.body.toString());
    }
    expected = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [ROWS, 64], X) })).logits!.data as Float32Array;
  });
  after(async () => {
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  test('tritonclient over HTTP and gRPC: metadata, configuration, repository, statistics, binary, async and streamed inference; shared-memory calls refused as documented', async () => {
    const http = new URL(cluster.url).host;
    const out = await runClientScript<TritonOut>('triton_clients.py', [http, cluster.grpcAddress, 'mlp', input, String(ROWS)]);
    for (const [protocol, side] of [
      ['http', out.http],
      ['grpc', out.grpc],
    ] as const) {
      assert.deepEqual([side.live, side.ready, side.model_ready, side.server], [true, true, true, 'troupe'], protocol);
      assert.ok(side.extensions.includes('statistics') && side.extensions.includes('model_repository'), `${protocol}: ${side.extensions}`);
      assert.deepEqual(side.inputs, [{ name: 'x', datatype: 'FP32', shape: [-1, 64] }], protocol);
      assert.deepEqual(side.config, { name: 'mlp', platform: 'onnxruntime_onnx' }, protocol);
      assert.deepEqual(side.repository, ['mlp', 'mlp-batched'], protocol);
      assert.deepEqual(side.stats_models, ['mlp'], protocol);
      assert.equal(side.binary.id, `${protocol}-1`);
      close(side.binary.logits, `${protocol} infer`);
      assert.equal(side.async.length, 4);
      side.async.forEach((logits, i) => close(logits, `${protocol} async_infer ${i}`));
    }
    out.http.aio.forEach((logits, i) => close(logits, `http.aio infer ${i}`));
    out.grpc.aio.infer.forEach((logits, i) => close(logits, `grpc.aio infer ${i}`));
    assert.deepEqual(
      out.grpc.stream.map((s) => s.id ?? s.error),
      ['stream-0', 'stream-1', 'stream-2'],
    );
    out.grpc.stream.forEach((s, i) => close(s.logits, `start_stream/async_stream_infer ${i}`));
    assert.deepEqual(
      out.grpc.aio.stream.map((s) => s.id ?? s.error),
      ['aio-stream-0', 'aio-stream-1'],
    );
    out.grpc.aio.stream.forEach((s, i) => close(s.logits, `grpc.aio stream_infer ${i}`));

    // docs/http-api.md: /v2/systemsharedmemory and /v2/cudasharedmemory are not served (404, which
    // the client raises with the server's message); docs/grpc.md: not in Troupe's .proto, UNIMPLEMENTED.
    const memory = out.http.shared_memory;
    assert.deepEqual(memory.register_system, {
      status: '404',
      message: 'no endpoint POST /v2/systemsharedmemory/region/r/register (see GET /docs)',
    });
    assert.deepEqual(memory.status_system, { status: '404', message: 'no endpoint GET /v2/systemsharedmemory/status (see GET /docs)' });
    assert.deepEqual(memory.register_cuda, {
      status: '404',
      message: 'no endpoint POST /v2/cudasharedmemory/region/r/register (see GET /docs)',
    });
    for (const [call, method] of [
      ['register_system', 'SystemSharedMemoryRegister'],
      ['status_system', 'SystemSharedMemoryStatus'],
      ['register_cuda', 'CudaSharedMemoryRegister'],
    ] as const) {
      const refused = out.grpc.shared_memory[call];
      assert.equal(refused?.status, 'StatusCode.UNIMPLEMENTED', `${call}: ${JSON.stringify(refused)}`);
      assert.match(refused.message, new RegExp(`/inference\\.GRPCInferenceService/${method}$`));
    }
  });

  test("KServe's InferenceRESTClient (protocol v2) and InferenceGRPCClient: health, binary and JSON/typed tensors, an unknown model", async () => {
    const out = await runClientScript<KServeOut>('kserve_clients.py', [cluster.url, cluster.grpcAddress, 'mlp', input, String(ROWS)]);
    for (const [protocol, side] of [
      ['rest', out.rest],
      ['grpc', out.grpc],
    ] as const) {
      assert.deepEqual([side.live, side.ready, side.model_ready], [true, true, true], protocol);
      close(side.binary.logits, `${protocol} binary`);
    }
    assert.deepEqual(
      [out.rest.binary.id, out.rest.json.id, out.grpc.binary.id, out.grpc.typed.id],
      ['rest-binary', 'rest-json', 'grpc-raw', 'grpc-typed'],
    );
    close(out.rest.json.logits, 'rest JSON');
    close(out.grpc.typed.logits, 'grpc typed');
    assert.deepEqual(out.rest.missing, { status: 404, body: { error: "unknown model 'nope'", code: 'TROUPE_ERR_UNKNOWN_DEPLOYMENT' } });
    assert.equal(out.grpc.missing?.code, 'NOT_FOUND');
    assert.match(out.grpc.missing.details, /^TROUPE_ERR_UNKNOWN_DEPLOYMENT: unknown model 'nope'/);
  });

  test('perf_analyzer over HTTP and gRPC (sync, async, streaming; with and without batching) reports no failed request', async () => {
    // Short windows on a shared machine: the figures are not asserted, so any window counts as
    // stable (-s 1000). -x 1 names the version: without it perf_analyzer takes the version whose
    // statistics moved during the window, and actors report statistics about once a second
    // (docs/http-api.md), so a window shorter than that may see none move.
    const common = ['-x', '1', '-p', '1000', '-s', '1000', '--max-trials', '5'];
    const runs = [
      ['HTTP', ['-m', 'mlp', '--shape', 'x:1,64', '-u', new URL(cluster.url).host, '-i', 'http', '--concurrency-range', '1:4:3']],
      ['gRPC', ['-m', 'mlp', '--shape', 'x:1,64', '-u', cluster.grpcAddress, '-i', 'grpc', '--concurrency-range', '1:4:3']],
      [
        'gRPC, async, streaming',
        ['-m', 'mlp', '--shape', 'x:1,64', '-u', cluster.grpcAddress, '-i', 'grpc', '-a', '--streaming', '--concurrency-range', '2'],
      ],
      [
        'HTTP, batches of 2 to a batching deployment',
        ['-m', 'mlp-batched', '-b', '2', '-u', new URL(cluster.url).host, '-i', 'http', '--concurrency-range', '2'],
      ],
    ] as const;
    for (const [what, args] of runs) {
      const run = await perfAnalyzer([...args, ...common], work, 120_000);
      const tail = run.output.slice(-3000);
      assert.equal(run.status, 0, `${what}: perf_analyzer exited ${run.status}:\n${tail}`);
      assert.deepEqual(run.errors, [], `${what}:\n${tail}`);
      const wanted = args.includes('1:4:3') ? [1, 4] : [2];
      assert.deepEqual(
        run.rows.map((r) => r.concurrency),
        wanted,
        `${what}:\n${tail}`,
      );
      for (const row of run.rows) assert.ok(row.inferPerSecond > 0, `${what}: concurrency ${row.concurrency} served nothing:\n${tail}`);
    }
  });
});
