import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  APPS_QUERY_ARGS,
  GPU_QUERY_ARGS,
  discoverGpus,
  parseComputeApps,
  parseGpuQuery,
  queryComputeApps,
  queryGpus,
  simulatedGpus,
} from '../../node-agent/gpus/index.js';
import { runTool } from '../../node-agent/gpus/run-tool.js';
import { GpuProcessSchema, GpuSchema } from '../../runtime/resources.js';
import type { Gpu, GpuProcess } from '../../runtime/resources.js';

// Tests run from dist/test/unit/; fixtures are not compiled, so they are read from the
// source tree at the repo root.
const FIXTURES = new URL('../../../test/fixtures/nvidia-smi/', import.meta.url);
const fixturePath = (name: string): string => fileURLToPath(new URL(name, FIXTURES));
const fixture = (name: string): string => readFileSync(fixturePath(name), 'utf8');

// Every test is bounded; the nvidia-smi calls also get short timeouts of their own.
const BOUND = { timeout: 10_000 };
const FAST = 2000;

const H100 = 'query-gpu-8x-h100.csv';
const A100 = 'query-gpu-2x-a100-na.csv';
const RTX = 'query-gpu-1x-rtx4090.csv';
const APPS = 'query-compute-apps-h100.csv';
const APPS_EMPTY = 'query-compute-apps-empty.csv';

function assertValidGpus(gpus: Gpu[]): void {
  for (const gpu of gpus) assert.deepEqual(GpuSchema.parse(gpu), gpu);
}

function assertValidApps(apps: GpuProcess[]): void {
  for (const app of apps) assert.deepEqual(GpuProcessSchema.parse(app), app);
}

describe('fixtures', () => {
  test('resolve from the compiled test file to the repo', BOUND, () => {
    for (const name of [H100, A100, RTX, APPS, APPS_EMPTY]) {
      assert.ok(existsSync(fixturePath(name)), `missing fixture ${fixturePath(name)}`);
    }
  });
});

describe('query arguments', () => {
  test('match the documented nvidia-smi invocations', BOUND, () => {
    assert.deepEqual(
      [...GPU_QUERY_ARGS],
      ['--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu', '--format=csv,noheader,nounits'],
    );
    assert.deepEqual([...APPS_QUERY_ARGS], ['--query-compute-apps=gpu_uuid,pid,used_memory', '--format=csv,noheader,nounits']);
    assert.ok(Object.isFrozen(GPU_QUERY_ARGS) && Object.isFrozen(APPS_QUERY_ARGS));
  });
});

describe('parseGpuQuery', () => {
  test('8x H100 node', BOUND, () => {
    const gpus = parseGpuQuery(fixture(H100));
    assert.equal(gpus.length, 8);
    assert.deepEqual(gpus[0], {
      index: 0,
      uuid: 'GPU-8f6f4b2e-3c1a-9d7e-5b20-41c6a9e07d13',
      name: 'NVIDIA H100 80GB HBM3',
      memoryTotalMiB: 81559,
      memoryUsedMiB: 71234,
      utilizationPct: 87,
      simulated: false,
    });
    assert.deepEqual(
      gpus.map((g) => g.index),
      [0, 1, 2, 3, 4, 5, 6, 7],
    );
    assert.equal(new Set(gpus.map((g) => g.uuid)).size, 8);
    for (const gpu of gpus) {
      assert.equal(gpu.name, 'NVIDIA H100 80GB HBM3');
      assert.equal(gpu.memoryTotalMiB, 81559);
    }
    assertValidGpus(gpus);
  });

  test('2x A100 with [N/A] utilization', BOUND, () => {
    const gpus = parseGpuQuery(fixture(A100));
    assert.equal(gpus.length, 2);
    assert.deepEqual(gpus[1], {
      index: 1,
      uuid: 'GPU-b85f2d6c-0a17-e943-7c5d-2f8e1b09a4d7',
      name: 'NVIDIA A100-SXM4-40GB',
      memoryTotalMiB: 40960,
      memoryUsedMiB: 18452,
      utilizationPct: null,
      simulated: false,
    });
    assert.equal(gpus[0]?.utilizationPct, 0);
    assertValidGpus(gpus);
  });

  test('consumer card whose name has spaces', BOUND, () => {
    const gpus = parseGpuQuery(fixture(RTX));
    assert.deepEqual(gpus, [
      {
        index: 0,
        uuid: 'GPU-a4d1f6e8-93c2-5b07-d8e9-1f64b3c20a59',
        name: 'NVIDIA GeForce RTX 4090',
        memoryTotalMiB: 24564,
        memoryUsedMiB: 1893,
        utilizationPct: 12,
        simulated: false,
      },
    ]);
    assertValidGpus(gpus);
  });

  test('CRLF line endings and trailing blank lines give the same result', BOUND, () => {
    const lf = fixture(H100);
    const crlf = `${lf.replace(/\n/g, '\r\n')}\r\n\r\n  \r\n`;
    assert.deepEqual(parseGpuQuery(crlf), parseGpuQuery(lf));
  });

  test('cells without a space after the comma', BOUND, () => {
    const [gpu] = parseGpuQuery('3,GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0,Tesla T4,15360,0,0\n');
    assert.equal(gpu?.index, 3);
    assert.equal(gpu?.name, 'Tesla T4');
    assert.equal(gpu?.memoryTotalMiB, 15360);
  });

  test('placeholders become null where the schema allows it', BOUND, () => {
    const gpus = parseGpuQuery(
      [
        '0, GPU-aaaa, NVIDIA GeForce GTX 1080 Ti, 11264, [Not Supported], [Not Supported]',
        '1, GPU-bbbb, NVIDIA A10G, 23028, [Unknown Error], [Unknown Error]',
        '2, GPU-cccc, NVIDIA L4, 23034, [Insufficient Permissions], N/A',
      ].join('\n'),
    );
    for (const gpu of gpus) {
      assert.equal(gpu.memoryUsedMiB, null);
      assert.equal(gpu.utilizationPct, null);
    }
    assertValidGpus(gpus);
  });

  test('"No devices were found" and empty output are no GPUs', BOUND, () => {
    assert.deepEqual(parseGpuQuery('No devices were found\n'), []);
    assert.deepEqual(parseGpuQuery(''), []);
    assert.deepEqual(parseGpuQuery('\r\n\n'), []);
  });

  test('garbage throws an Error naming the line', BOUND, () => {
    assert.throws(
      () => parseGpuQuery('hello world\n'),
      (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.match(err.message, /line 1/);
        assert.match(err.message, /hello world/);
        return true;
      },
    );
    const secondBad = `${fixture(RTX)}<html>Service Unavailable</html>\n`;
    assert.throws(() => parseGpuQuery(secondBad), /line 2 .*Service Unavailable/);
  });

  test('values the schema rejects or that are not numbers throw', BOUND, () => {
    const bad = [
      '0, GPU-aaaa, NVIDIA L4, [N/A], 0, 0', // no total memory: nothing to schedule against
      '0, [N/A], NVIDIA L4, 23034, 0, 0', // no identity
      '0, GPU-aaaa, NVIDIA L4, 23034 MiB, 0, 0', // units, i.e. called without nounits
      '0, GPU-aaaa, NVIDIA L4, 23034, 0, 250', // utilization over 100 (schema)
      '-1, GPU-aaaa, NVIDIA L4, 23034, 0, 0',
      'x, GPU-aaaa, NVIDIA L4, 23034, 0, 0',
      '0, GPU-aaaa, NVIDIA L4, 23034, , 0',
      '0, GPU-aaaa, 23034, 0, 0',
    ];
    for (const line of bad) {
      assert.throws(() => parseGpuQuery(line), /line 1/, line);
    }
  });
});

describe('parseComputeApps', () => {
  test('processes on the H100 node', BOUND, () => {
    const apps = parseComputeApps(fixture(APPS));
    assert.equal(apps.length, 4);
    assert.deepEqual(apps[0], {
      gpuUuid: 'GPU-8f6f4b2e-3c1a-9d7e-5b20-41c6a9e07d13',
      pid: 48213,
      usedMemoryMiB: 71224,
    });
    // Every process sits on a GPU of the same node.
    const uuids = new Set(parseGpuQuery(fixture(H100)).map((g) => g.uuid));
    for (const app of apps) assert.ok(uuids.has(app.gpuUuid), app.gpuUuid);
    assertValidApps(apps);
  });

  test('empty output and "No running processes found" are no processes', BOUND, () => {
    assert.deepEqual(parseComputeApps(fixture(APPS_EMPTY)), []);
    assert.deepEqual(parseComputeApps('No running processes found\n'), []);
    assert.deepEqual(parseComputeApps('No running compute processes found\r\n'), []);
  });

  test('CRLF and [N/A] used memory', BOUND, () => {
    const apps = parseComputeApps('GPU-aaaa, 4242, [N/A]\r\nGPU-aaaa,4243,512\r\n\r\n');
    assert.deepEqual(apps, [
      { gpuUuid: 'GPU-aaaa', pid: 4242, usedMemoryMiB: null },
      { gpuUuid: 'GPU-aaaa', pid: 4243, usedMemoryMiB: 512 },
    ]);
    assertValidApps(apps);
  });

  test('garbage throws an Error naming the line', BOUND, () => {
    assert.throws(() => parseComputeApps('GPU-aaaa, 1, 2\nsegfault\n'), /line 2 .*segfault/);
    assert.throws(() => parseComputeApps('GPU-aaaa, 0, 2'), /line 1/); // pid 0 (schema)
    assert.throws(() => parseComputeApps('GPU-aaaa, [N/A], 2'), /line 1/);
    assert.throws(() => parseComputeApps('GPU-aaaa, 12, 3, 4'), /line 1 .*columns/);
  });
});

describe('output captured on a real H200 (driver 580.159.04)', () => {
  const H200 = 'captured/query-gpu-1x-h200.csv';
  const H200_BUSY = 'captured/query-gpu-1x-h200-busy.csv';
  const UUID = 'GPU-ff9382e6-a7e7-55a8-804a-b945cc4277ae';

  test('the idle GPU', BOUND, () => {
    const gpus = parseGpuQuery(fixture(H200));
    assert.deepEqual(gpus, [
      { index: 0, uuid: UUID, name: 'NVIDIA H200', memoryTotalMiB: 143771, memoryUsedMiB: 0, utilizationPct: 0, simulated: false },
    ]);
    assertValidGpus(gpus);
  });

  test('the GPU while a process holds memory and computes', BOUND, () => {
    const [gpu] = parseGpuQuery(fixture(H200_BUSY));
    assert.deepEqual(gpu, {
      index: 0,
      uuid: UUID,
      name: 'NVIDIA H200',
      memoryTotalMiB: 143771,
      memoryUsedMiB: 3919,
      utilizationPct: 100,
      simulated: false,
    });
  });

  test('its compute processes: none, then the one holding memory on that GPU', BOUND, () => {
    assert.deepEqual(parseComputeApps(fixture('captured/query-compute-apps-h200-idle.csv')), []);
    const apps = parseComputeApps(fixture('captured/query-compute-apps-h200-busy.csv'));
    assert.deepEqual(apps, [{ gpuUuid: UUID, pid: 486, usedMemoryMiB: 3910 }]);
    assertValidApps(apps);
  });
});

describe('queryGpus / queryComputeApps with a fake nvidia-smi', () => {
  let dir = '';
  // Answers like nvidia-smi for the two queries; anything else means the arguments did not
  // arrive as separate argv entries, so it fails loudly.
  let fakeSmi = '';

  const script = async (name: string, body: string): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, `#!/bin/sh\n${body}\n`);
    await chmod(path, 0o755);
    return path;
  };
  const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-nvidia-smi-'));
    fakeSmi = await script(
      'nvidia-smi',
      [
        `if [ "$#" -ne 2 ] || [ "$2" != "--format=csv,noheader,nounits" ]; then echo "bad args: $*" >&2; exit 2; fi`,
        'case "$1" in',
        `  --query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu) exec cat ${quote(fixturePath(H100))} ;;`,
        `  --query-compute-apps=gpu_uuid,pid,used_memory) exec cat ${quote(fixturePath(APPS))} ;;`,
        '  *) echo "bad args: $*" >&2; exit 2 ;;',
        'esac',
      ].join('\n'),
    );
  });

  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const skip = process.platform === 'win32' ? 'fake nvidia-smi is a POSIX shell script' : false;

  test('queryGpus parses what the command prints', { ...BOUND, skip }, async () => {
    const gpus = await queryGpus({ command: fakeSmi, timeoutMs: FAST });
    assert.deepEqual(gpus, parseGpuQuery(fixture(H100)));
    assertValidGpus(gpus);
  });

  test('queryComputeApps parses what the command prints', { ...BOUND, skip }, async () => {
    const apps = await queryComputeApps({ command: fakeSmi, timeoutMs: FAST });
    assert.deepEqual(apps, parseComputeApps(fixture(APPS)));
  });

  test('discoverGpus uses nvidia-smi unless asked to simulate', { ...BOUND, skip }, async () => {
    assert.equal((await discoverGpus({ command: fakeSmi })).length, 8);
    assert.equal((await discoverGpus({ command: fakeSmi, simulate: 0 })).length, 8);
    const sim = await discoverGpus({ command: fakeSmi, simulate: 2, simulatedMemoryMiB: 1024 });
    assert.deepEqual(sim, simulatedGpus(2, 1024));
  });

  test('a missing binary means no GPUs', BOUND, async () => {
    const command = join(tmpdir(), 'troupe-no-such-dir', 'nvidia-smi-does-not-exist');
    assert.deepEqual(await queryGpus({ command, timeoutMs: FAST }), []);
    assert.deepEqual(await queryComputeApps({ command, timeoutMs: FAST }), []);
    assert.deepEqual(await discoverGpus({ command }), []);
  });

  test('a failing command rejects with its stderr', { ...BOUND, skip }, async () => {
    const failing = await script(
      'failing-smi',
      `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2\nexit 1`,
    );
    for (const query of [queryGpus, queryComputeApps]) {
      await assert.rejects(query({ command: failing, timeoutMs: FAST }), (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.match(err.message, /exited with code 1/);
        assert.match(err.message, /couldn't communicate with the NVIDIA driver/);
        return true;
      });
    }
    // The agent's discovery says so and names the way out; --nvidia-smi none runs nothing and offers no GPUs.
    await assert.rejects(discoverGpus({ command: failing, timeoutMs: FAST }), {
      code: 'TROUPE_ERR_INTERNAL',
      message:
        /^cannot list this host's GPUs: .*exited with code 1.* \(fix the NVIDIA driver, or start the agent with --nvidia-smi none to offer no GPUs\)$/s,
    });
    assert.deepEqual(await discoverGpus({ command: 'none' }), []);
  });

  test('output the parser cannot read rejects', { ...BOUND, skip }, async () => {
    const noisy = await script('noisy-smi', 'echo "Segmentation fault"');
    await assert.rejects(queryGpus({ command: noisy, timeoutMs: FAST }), /line 1 .*Segmentation fault/);
  });

  test('a hung command is killed at the timeout', { ...BOUND, skip }, async () => {
    const hung = await script('hung-smi', 'exec sleep 30');
    const started = Date.now();
    await assert.rejects(queryGpus({ command: hung, timeoutMs: 200 }), /timed out after 200 ms/);
    assert.ok(Date.now() - started < 5000);
  });

  // A process stuck in the driver survives SIGKILL; a shell script cannot be made
  // unkillable, so these use a signal the script ignores to get the same behaviour.
  test('a command that survives the kill signal is given up on', { ...BOUND, skip }, async () => {
    const pidFile = join(dir, 'stubborn.pid');
    const stubborn = await script('stubborn-smi', `trap '' USR2\necho $$ > ${quote(pidFile)}\nexec sleep 8`);
    try {
      const started = Date.now();
      await assert.rejects(
        runTool(stubborn, [], { timeoutMs: 200, killSignal: 'SIGUSR2', graceMs: 100 }),
        /timed out after 200 ms and did not exit/,
      );
      assert.ok(Date.now() - started < 5000);
    } finally {
      // The sleep outlives the call by design; end it here rather than leave it behind.
      const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(pid) && pid > 0) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
  });

  test('a command that exits 0 after the timeout still counts as timed out', { ...BOUND, skip }, async () => {
    const late = await script('late-smi', `trap '' USR2\nsleep 0.5\nexit 0`);
    await assert.rejects(runTool(late, [], { timeoutMs: 100, killSignal: 'SIGUSR2', graceMs: 4000 }), /timed out after 100 ms$/);
  });

  test('a file that is not executable rejects', { ...BOUND, skip }, async () => {
    const path = join(dir, 'not-executable');
    await writeFile(path, '#!/bin/sh\n');
    await chmod(path, 0o644);
    await assert.rejects(queryGpus({ command: path, timeoutMs: FAST }), /failed to run/);
  });

  test('a bad timeout is refused', BOUND, async () => {
    await assert.rejects(queryGpus({ command: fakeSmi, timeoutMs: 0 }), RangeError);
  });
});

describe('simulatedGpus', () => {
  test('idle, labelled, schema-valid GPUs', BOUND, () => {
    const gpus = simulatedGpus(3);
    assert.deepEqual(gpus[2], {
      index: 2,
      uuid: 'GPU-sim-2',
      name: 'Simulated GPU',
      memoryTotalMiB: 16384,
      memoryUsedMiB: 0,
      utilizationPct: 0,
      simulated: true,
    });
    assert.deepEqual(
      gpus.map((g) => g.uuid),
      ['GPU-sim-0', 'GPU-sim-1', 'GPU-sim-2'],
    );
    assertValidGpus(gpus);
    assert.equal(simulatedGpus(1, 81920)[0]?.memoryTotalMiB, 81920);
    assert.deepEqual(simulatedGpus(0), []);
  });

  test('nonsense counts are refused', BOUND, async () => {
    for (const count of [-1, 1.5, Number.NaN, 65]) {
      assert.throws(() => simulatedGpus(count), RangeError);
    }
    assert.throws(() => simulatedGpus(1, -5), RangeError);
    await assert.rejects(discoverGpus({ simulate: -1 }), RangeError);
  });
});
