import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import {
  GraphBuilder,
  Rng,
  attr,
  boundaryTensor,
  buildMlp,
  buildMobileNetV2Like,
  buildSmallCnn,
  decodeModel,
  emitStages,
  normalArray,
  writeExampleModels,
} from '../../models/index.js';
import type { DenseWeights, MlpModel } from '../../models/index.js';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const open = (model: Uint8Array | string) =>
  typeof model === 'string'
    ? InferenceSession.create(model, { intraOpNumThreads: 1 })
    : InferenceSession.create(model, { intraOpNumThreads: 1 });

function randomInput(dims: number[], seed = 123): Tensor {
  return new Tensor(
    'float32',
    normalArray(
      new Rng(seed),
      dims.reduce((a, b) => a * b, 1),
    ),
    dims,
  );
}

async function runOne(session: InferenceSession, input: Tensor): Promise<Tensor> {
  const out = await session.run({ [session.inputNames[0]!]: input });
  return out[session.outputNames[0]!]!;
}

function assertFinite(t: Tensor): void {
  const data = t.data as Float32Array;
  for (let i = 0; i < data.length; i++) assert.ok(Number.isFinite(data[i]), `non-finite value at ${i}`);
}

// Relative tolerance, floored by the output's overall scale so values near zero (where
// float32 summation order dominates) do not fail spuriously.
function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, rtol = 1e-5): void {
  assert.equal(actual.length, expected.length);
  let scale = 0;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]!));
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    assert.ok(Math.abs(a - e) <= rtol * (Math.abs(e) + scale), `index ${i}: ${a} vs ${e}`);
  }
}

/** Plain-JS (float64) forward pass: ReLU after every layer but the last. */
function mlpForward(weights: DenseWeights[], x: Float32Array, batch: number): Float64Array {
  let h: ArrayLike<number> = x;
  weights.forEach((dw, layer) => {
    const y = new Float64Array(batch * dw.outDim);
    for (let n = 0; n < batch; n++) {
      for (let o = 0; o < dw.outDim; o++) {
        let s = dw.b[o]!;
        for (let i = 0; i < dw.inDim; i++) s += h[n * dw.inDim + i]! * dw.w[i * dw.outDim + o]!;
        y[n * dw.outDim + o] = layer + 1 < weights.length ? Math.max(0, s) : s;
      }
    }
    h = y;
  });
  return h as Float64Array;
}

describe('MLP', () => {
  let mlp: MlpModel;
  let session: InferenceSession;
  before(async () => {
    mlp = buildMlp();
    session = await open(mlp.bytes);
  });

  it('has x -> logits', () => {
    assert.deepEqual(session.inputNames, ['x']);
    assert.deepEqual(session.outputNames, ['logits']);
  });

  for (const batch of [1, 3]) {
    it(`matches a plain-JS forward pass at batch ${batch}`, async () => {
      const x = randomInput([batch, 64], batch);
      const y = await runOne(session, x);
      assert.deepEqual(y.dims, [batch, 10]);
      assertFinite(y);
      assertClose(y.data as Float32Array, mlpForward(mlp.weights, x.data as Float32Array, batch));
    });
  }

  it('exposes weights of the requested sizes', () => {
    const m = buildMlp({ inputDim: 8, hidden: [5], outputDim: 3 });
    assert.deepEqual(
      m.weights.map((w) => [w.inDim, w.outDim]),
      [
        [8, 5],
        [5, 3],
      ],
    );
    assert.equal(m.weights[0]!.w.length, 40);
  });

  it('runs as pipeline stages with the same result', async () => {
    const stages = await Promise.all(emitStages(mlp.spec, [1, 2]).map((b) => open(b)));
    assert.deepEqual(
      stages.map((s) => [s.inputNames, s.outputNames]),
      [
        [['x'], ['fc0_out']],
        [['fc0_out'], ['fc1_out']],
        [['fc1_out'], ['logits']],
      ],
    );
    const x = randomInput([3, 64], 9);
    let h = x;
    for (const s of stages) h = await runOne(s, h);
    assertClose(h.data as Float32Array, (await runOne(session, x)).data as Float32Array);
  });
});

describe('small CNN', () => {
  let session: InferenceSession;
  before(async () => {
    session = await open(buildSmallCnn().bytes);
  });

  it('has image -> logits', () => {
    assert.deepEqual(session.inputNames, ['image']);
    assert.deepEqual(session.outputNames, ['logits']);
  });

  for (const batch of [1, 3]) {
    it(`runs at batch ${batch}`, async () => {
      const y = await runOne(session, randomInput([batch, 3, 32, 32]));
      assert.deepEqual(y.dims, [batch, 10]);
      assertFinite(y);
    });
  }

  it('types attributes (ints vs floats vs int lists)', () => {
    const nodes = decodeModel(buildSmallCnn().bytes).graph?.node ?? [];
    const conv = nodes.find((n) => n.opType === 'Conv')!;
    const gemm = nodes.find((n) => n.opType === 'Gemm')!;
    const type = (n: typeof conv, name: string) => n.attribute?.find((a) => a.name === name)?.type;
    assert.equal(type(conv, 'strides'), 7); // INTS
    assert.equal(type(conv, 'group'), 2); // INT
    assert.equal(type(gemm, 'alpha'), 1); // FLOAT
    assert.throws(() => attr.int(1.5), RangeError);
  });
});

describe('MobileNetV2-like', () => {
  let session: InferenceSession;
  before(async () => {
    session = await open(buildMobileNetV2Like().bytes);
  });

  it('has image -> logits', () => {
    assert.deepEqual(session.inputNames, ['image']);
    assert.deepEqual(session.outputNames, ['logits']);
  });

  for (const batch of [1, 2]) {
    it(`runs at batch ${batch} with finite, input-dependent logits`, async () => {
      const y = await runOne(session, randomInput([batch, 3, 224, 224]));
      assert.deepEqual(y.dims, [batch, 1000]);
      assertFinite(y);
      const d = y.data as Float32Array;
      assert.ok(
        d.some((v) => v !== d[0]),
        'logits are constant',
      );
      if (batch === 2) assert.notDeepEqual(d.slice(0, 1000), d.slice(1000));
    });
  }

  it('splits into stages at a block boundary', async () => {
    const { bytes, spec } = buildMobileNetV2Like({ widthMultiplier: 0.35, resolution: 96, numClasses: 7 });
    const cut = spec.layers.findIndex((l) => l.name === 'block8');
    assert.deepEqual(boundaryTensor(spec, cut), { name: 'block7_out', dtype: 'float32', dims: ['N', 24, 6, 6] });
    const [a, b] = await Promise.all(emitStages(spec, [cut]).map((s) => open(s)));
    const x = randomInput([1, 3, 96, 96]);
    const staged = await runOne(b!, await runOne(a!, x));
    const whole = await runOne(await open(bytes), x);
    assert.deepEqual(staged.dims, [1, 7]);
    assertClose(staged.data as Float32Array, whole.data as Float32Array, 1e-4);
  });
});

describe('determinism', () => {
  const builders = {
    mlp: (seed?: number) => buildMlp({ seed }).bytes,
    cnn: (seed?: number) => buildSmallCnn({ seed }).bytes,
    mobilenet: (seed?: number) => buildMobileNetV2Like({ seed }).bytes,
  };
  for (const [name, build] of Object.entries(builders)) {
    it(`${name}: same seed gives identical bytes, another seed differs`, () => {
      const a = Buffer.from(build(5));
      assert.ok(a.equals(Buffer.from(build(5))));
      assert.ok(!a.equals(Buffer.from(build(6))));
    });
  }
});

describe('GraphBuilder', () => {
  it('rejects reading a tensor before it is defined', () => {
    const g = new GraphBuilder();
    g.input('a', 'float32', ['N']);
    g.node('Relu', ['b'], ['c']);
    g.output('c', 'float32', ['N']);
    assert.throws(() => g.toBytes(), /reads 'b'/);
  });

  it('rejects outputs nothing produces and duplicate names', () => {
    const g = new GraphBuilder();
    g.input('a', 'float32', [1]);
    g.output('z', 'float32', [1]);
    assert.throws(() => g.toBytes(), /never produced/);
    assert.throws(() => g.initializer('a', [1], new Float32Array(1)), /already defined/);
    assert.throws(() => g.initializer('w', [2], new Float32Array(3)), /3 values/);
  });

  it('writes ir_version 8, opset 13 and producer troupe', () => {
    const m = decodeModel(buildMlp({ hidden: [4] }).bytes);
    assert.equal(Number(m.irVersion), 8);
    assert.equal(Number(m.opsetImport[0]!.version), 13);
    assert.equal(m.producerName, 'troupe');
  });
});

describe('writeExampleModels and generate script', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'troupe-models-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes loadable models and skips unchanged files', async () => {
    const target = path.join(dir, 'nested', 'out');
    const paths = await writeExampleModels(target);
    assert.deepEqual(Object.keys(paths).sort(), ['cnn', 'mlp', 'mobilenet', 'rowsum']);
    for (const p of Object.values(paths)) assert.ok(path.isAbsolute(p) && path.dirname(p) === target);
    assert.ok(Buffer.from(buildMlp().bytes).equals(await readFile(paths.mlp)));
    assert.deepEqual((await open(paths.cnn)).outputNames, ['logits']);
    const before = (await stat(paths.mobilenet)).mtimeMs;
    await writeExampleModels(target);
    assert.equal((await stat(paths.mobilenet)).mtimeMs, before);
  });

  it('generate exits 2 with usage when OUTDIR is missing', () => {
    const script = fileURLToPath(new URL('../../models/generate.js', import.meta.url));
    const res = spawnSync(process.execPath, [script], { encoding: 'utf8' });
    assert.equal(res.status, 2);
    assert.match(res.stderr, /usage/);
  });
});
