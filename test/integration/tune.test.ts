import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { connect, tensor } from '../../runtime/internal.js';
import type { ModelDeploymentInput } from '../../runtime/internal.js';
import { sweep } from '../../cli/tune/layouts.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

/** `troupe ARGS`, bounded: its exit status and output. */
function troupe(args: string[], timeoutMs = 150_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`troupe ${args.join(' ')} ran past ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** The table's rows (not its header or rule), as cells. */
function rows(stdout: string): string[][] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| layout') && !l.startsWith('| ---'))
    .map((l) =>
      l
        .slice(2, -2)
        .split(' | ')
        .map((c) => c.trim()),
    );
}

function assertFigures(table: string[][], why: string): void {
  for (const [label, rps, p50, p99, errors] of table) {
    for (const [name, value] of [
      ['req/s', rps],
      ['p50', p50],
      ['p99', p99],
    ] as const)
      assert.ok(Number(value) > 0 && Number.isFinite(Number(value)), `${why}: ${label}: ${name} is ${value}`);
    assert.equal(errors, '0', `${why}: ${label}`);
  }
}

describe('troupe tune', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let dir: string;
  before(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'troupe-tune-'));
  });
  after(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('a short sweep over HTTP: a row per layout with positive figures, the best written as a spec that deploys and answers', async () => {
    const file = join(dir, 'best.yaml');
    const out = await troupe([
      'tune',
      'mlp.onnx',
      '--head',
      cluster.url,
      '--name',
      'tuned',
      '--cpus',
      '2',
      '--batch-sizes',
      '1,8',
      '--seconds',
      '0.3',
      '--concurrency',
      '4',
      '--write',
      file,
    ]);
    assert.equal(out.status, 0, out.stderr);
    const table = rows(out.stdout);
    assert.equal(table.length, sweep(2, [1, 8], [0]).length, out.stdout);
    assertFigures(table, 'http');
    assert.match(
      table[0]![0]!,
      /^first deploy \(nothing named: chosen at load\): 1 replica x /,
      'the first row is what a first deploy gets',
    );
    assert.equal(table.filter((r) => r[0]!.endsWith('(best)')).length, 1, out.stdout);
    // Not a terminal: no progress bar redrawn on stderr.
    assert.doesNotMatch(out.stderr, /\r/);
    const spec = parseYaml(await readFile(file, 'utf8')) as ModelDeploymentInput;
    assert.equal(spec.name, 'tuned');
    assert.equal(spec.model, 'mlp.onnx');
    const client = await connect(cluster.url);
    try {
      assert.equal(
        (await client.describe()).deployments.find((d) => d.name === 'tuned'),
        undefined,
        'tune took its deployment away',
      );
      const view = await client.deploy(spec);
      assert.equal(view.state, 'READY');
      const answer = await client.run('tuned', { x: tensor('float32', [1, 64], new Float32Array(64).fill(0.5)) });
      assert.deepEqual(answer.logits?.shape, [1, 10]);
      await client.undeploy('tuned');
    } finally {
      await client.close();
    }
  });

  test('over gRPC and the SDK, and a p99 budget no layout meets: no best, exit 1', async () => {
    for (const door of ['grpc', 'sdk']) {
      const out = await troupe([
        'tune',
        'mlp.onnx',
        '--head',
        cluster.url,
        '--grpc',
        cluster.grpcAddress,
        '--door',
        door,
        '--cpus',
        '1',
        '--batch-sizes',
        '8',
        '--seconds',
        '0.3',
      ]);
      assert.equal(out.status, 0, out.stderr);
      const table = rows(out.stdout);
      assert.equal(table.length, 2, out.stdout);
      assertFigures(table, door);
    }
    const none = await troupe([
      'tune',
      'mlp.onnx',
      '--head',
      cluster.url,
      '--cpus',
      '1',
      '--batch-sizes',
      '1',
      '--seconds',
      '0.2',
      '--p99-ms',
      '0.000001',
    ]);
    assert.equal(none.status, 1, none.stderr);
    assert.match(none.stdout, /no layout answered without errors within p99 0\.000001 ms/);
  });

  test('bad flags are TROUPE_ERR_BAD_FLAG (exit 2), naming the flag', async () => {
    for (const [args, message] of [
      [['tune'], /MODEL is required/],
      [['tune', 'mlp.onnx', '--door', 'ftp'], /--door: must be one of http, grpc, sdk/],
      [['tune', 'mlp.onnx', '--batch-sizes', '0,8'], /--batch-sizes: each must be between 1 and 65536/],
      [['tune', 'mlp.onnx', '--write', 'spec.txt'], /--write: must end in \.yaml, \.yml or \.json/],
      [['tune', 'mlp.onnx', '--max-minutes', '0'], /--max-minutes: must be above 0/],
      [['tune', join(dir, 'missing.onnx')], /is not a file/],
    ] as const) {
      const out = await troupe([...args], 30_000);
      assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, /TROUPE_ERR_BAD_FLAG/);
      assert.match(out.stderr, message);
    }
  });
});
