import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { tensor } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { PROTO_DIR } from '../helpers/grpc-client.js';
import { call } from '../helpers/http.js';
import { assertClose } from '../helpers/mlp-oip.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * A client from outside our code and language: Python's grpcio, with stubs that grpc_tools
 * compiles from proto/ (Debian's python3-grpcio and python3-grpc-tools; .ci/run installs them),
 * calling a real head. Skipped, saying why, where Python's grpc is not installed.
 */

const SCRIPT = fileURLToPath(new URL('../../../test/python/grpc_infer.py', import.meta.url));
/** The python3 on PATH, else Debian's (apt installs there, even when PATH finds another first, e.g. pyenv's). */
const CANDIDATES = ['python3', '/usr/bin/python3'];
const PYTHON = CANDIDATES.find((candidate) => spawnSync(candidate, ['-c', 'import grpc, grpc_tools']).status === 0);
const missing = PYTHON
  ? undefined
  : `no python3 of ${CANDIDATES.join(', ')} has grpc and grpc_tools (apt-get install python3-grpcio python3-grpc-tools)`;

describe('gRPC from Python (grpcio, stubs compiled from proto/ by grpc_tools)', { timeout: 120_000, skip: missing }, () => {
  let cluster: TestCluster;
  let work: string;
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'troupe-grpc-python-'));
    cluster = await startCluster();
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
  });
  after(async () => {
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  test("the compiled stubs call every kind of method; the logits are onnxruntime's", async () => {
    const compiled = spawnSync(
      PYTHON!,
      [
        '-m',
        'grpc_tools.protoc',
        `-I${PROTO_DIR}`,
        `--python_out=${work}`,
        `--grpc_python_out=${work}`,
        'grpc_service.proto',
        'model_config.proto',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(compiled.status, 0, compiled.stderr);

    const rows = 2;
    const x = seededFloats(rows * 64, 21);
    const input = join(work, 'x.f32');
    await writeFile(input, Buffer.from(x.buffer));
    const run = spawnSync(PYTHON!, [SCRIPT, cluster.grpcAddress, 'mlp', input, String(rows)], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, PYTHONPATH: work },
    });
    assert.equal(run.status, 0, run.stderr);
    const out = JSON.parse(run.stdout) as {
      live: boolean;
      ready: boolean;
      model_ready: boolean;
      server: { name: string; extensions: string[] };
      inputs: { name: string; datatype: string; shape: number[] }[];
      config: { name: string; platform: string; max_batch_size: number };
      raw: { id: string; shape: number[]; logits: number[] };
      typed: number[];
      stream: { error: string; logits: number[] };
      missing: { code: string; details: string } | null;
    };
    assert.deepEqual([out.live, out.ready, out.model_ready], [true, true, true]);
    assert.equal(out.server.name, 'troupe');
    assert.deepEqual(out.inputs, [{ name: 'x', datatype: 'FP32', shape: [-1, 64] }]);
    assert.deepEqual([out.config.name, out.config.platform], ['mlp', 'onnxruntime_onnx']);
    const expected = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [rows, 64], x) })).logits!.data as Float32Array;
    assert.deepEqual([out.raw.id, out.raw.shape], ['py-1', [rows, 10]]);
    assertClose(out.raw.logits, expected, 'raw');
    assertClose(out.typed, expected, 'typed');
    assert.equal(out.stream.error, '');
    assertClose(out.stream.logits, expected, 'streamed');
    assert.equal(out.missing?.code, 'NOT_FOUND');
    assert.match(out.missing.details, /^TROUPE_ERR_UNKNOWN_DEPLOYMENT: unknown model 'nope'/);
  });
});
