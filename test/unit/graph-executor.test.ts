import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { execute } from '../../runtime/graph/executor.js';
import type { LeafResult, StepCaller } from '../../runtime/graph/executor.js';
import type { PlanLeaf, PlanNode } from '../../runtime/graph/compile.js';
import type { LeafInfo } from '../../runtime/graph/signature.js';
import type { RunTrace } from '../../runtime/graph/trace.js';
import { TroupeError } from '../../runtime/errors.js';
import { tensor } from '../../runtime/tensor/tensor.js';
import { fromWire, toWire } from '../../runtime/tensor/wire.js';
import type { WireTensorMap } from '../../runtime/tensor/wire.js';

// The executor is ours and real; the step runner at its edge is a fake: each deployment is a
// small function of float32 [rows, 1] tensors, and a test may hold a deployment's calls until it
// releases them, to see what runs at once and what waits.

type Fn = (x: number[]) => number[];

interface Deployment {
  input: string;
  output: string;
  fn: Fn;
  replicas?: number;
  kind?: 'model' | 'fn';
}

const DEPLOYMENTS: Record<string, Deployment> = {
  double: { input: 'x', output: 'y', fn: (x) => x.map((v) => 2 * v), replicas: 2 },
  inc: { input: 'y', output: 'z', fn: (x) => x.map((v) => v + 1) },
  a: { input: 'x', output: 'p', fn: (x) => x },
  b: { input: 'x', output: 'p', fn: (x) => x.map((v) => 3 * v) },
  boom: {
    input: 'y',
    output: 'z',
    fn: () => {
      throw new TroupeError('TROUPE_ERR_INFERENCE', "deployment 'boom': the model failed");
    },
  },
};

const column = (values: number[]) => toWire(tensor('float32', [values.length, 1], Float32Array.from(values)));
const valuesOf = (m: WireTensorMap, name: string) => [...(fromWire(m[name]!, name).data as Float32Array)];

interface Call {
  name: string;
  rows: number;
  deadline: number | undefined;
}

class FakeSteps implements StepCaller {
  readonly calls: Call[] = [];
  /** Calls of these deployments wait until released. */
  readonly held = new Map<string, (() => void)[]>();
  finished = 0;

  hold(name: string): void {
    this.held.set(name, []);
  }

  /** Lets the oldest held call of `name` go on. */
  release(name: string): void {
    const next = this.held.get(name)?.shift();
    assert.ok(next, `no call of '${name}' is held`);
    next();
  }

  waiting(name: string): number {
    return this.held.get(name)?.length ?? 0;
  }

  async call(name: string, inputs: WireTensorMap, deadline: number | undefined): Promise<LeafResult> {
    const d = DEPLOYMENTS[name];
    assert.ok(d, `no deployment '${name}'`);
    const x = inputs[d.input];
    assert.ok(x, `'${name}' was called without its input '${d.input}' (got ${Object.keys(inputs).join(', ')})`);
    this.calls.push({ name, rows: x.shape[0]!, deadline });
    const queue = this.held.get(name);
    if (queue) await new Promise<void>((resolve) => queue.push(resolve));
    const out = d.fn(valuesOf(inputs, d.input));
    this.finished++;
    return { outputs: { [d.output]: column(out) }, queueMs: 0.5, computeMs: 1 };
  }

  leaf(name: string): LeafInfo {
    const d = DEPLOYMENTS[name];
    if (!d) return { kind: 'model', metadata: null };
    return {
      kind: d.kind ?? 'model',
      metadata: {
        inputs: [{ name: d.input, dtype: 'float32', shape: ['N', 1] }],
        outputs: [{ name: d.output, dtype: 'float32', shape: ['N', 1] }],
      },
    };
  }

  replicas(name: string): number {
    return DEPLOYMENTS[name]?.replicas ?? 1;
  }
}

const leaf = (name: string): PlanLeaf => ({ kind: 'model', name });

/** Turns the event loop until `done`, at most `turns` times: every wait here is bounded. */
async function until(what: string, done: () => boolean, turns = 1000): Promise<void> {
  for (let i = 0; i < turns && !done(); i++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(done(), `gave up waiting for ${what}`);
}

describe('execute: pipelines', { timeout: 10_000 }, () => {
  test('steps run in order, each on what the one before produced', async () => {
    const steps = new FakeSteps();
    const plan: PlanNode = { kind: 'pipeline', name: 'p', steps: [leaf('double'), leaf('inc')], map: [] };
    const trace: RunTrace = [];
    const out = await execute(plan, { x: column([1, 2]) }, steps, { trace });
    assert.deepEqual(valuesOf(out, 'z'), [3, 5]);
    assert.deepEqual(
      steps.calls.map((c) => c.name),
      ['double', 'inc'],
    );
    assert.deepEqual(
      trace.map((t) => [t.step, t.kind]),
      [
        ['p > double', 'model'],
        ['p > inc', 'model'],
        ['p', 'pipeline'],
      ],
    );
    const first = trace[0]!;
    assert.deepEqual([first.queueMs, first.computeMs], [0.5, 1], "a leaf's own account splits its time");
    assert.ok(first.transferMs! >= 0);
  });

  test('the second step does not start before the first has answered', async () => {
    const steps = new FakeSteps();
    steps.hold('double');
    const run = execute({ kind: 'pipeline', name: 'p', steps: [leaf('double'), leaf('inc')], map: [] }, { x: column([1]) }, steps);
    await until('the first step', () => steps.waiting('double') === 1);
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      steps.calls.map((c) => c.name),
      ['double'],
    );
    steps.release('double');
    assert.deepEqual(valuesOf(await run, 'z'), [3]);
  });

  test("a failing step's error keeps its code and names the step; later steps never start", async () => {
    const steps = new FakeSteps();
    const plan: PlanNode = { kind: 'pipeline', name: 'p', steps: [leaf('double'), leaf('boom'), leaf('inc')], map: [] };
    await assert.rejects(execute(plan, { x: column([1]) }, steps), (err: unknown) => {
      assert.ok(err instanceof TroupeError);
      assert.equal(err.code, 'TROUPE_ERR_INFERENCE');
      assert.equal(err.message, "step 'p > boom': deployment 'boom': the model failed");
      return true;
    });
    assert.deepEqual(
      steps.calls.map((c) => c.name),
      ['double', 'boom'],
    );
  });

  test('a nested failure is named once, by its full path', async () => {
    const steps = new FakeSteps();
    const inner: PlanNode = { kind: 'pipeline', name: 'inner', steps: [leaf('boom')], map: [] };
    const plan: PlanNode = { kind: 'pipeline', name: 'outer', steps: [leaf('double'), inner], map: [] };
    await assert.rejects(execute(plan, { x: column([1]) }, steps), {
      message: "step 'outer > inner > boom': deployment 'boom': the model failed",
    });
  });

  test('an input nothing produced fails as BAD_INPUT, naming what was there', async () => {
    const steps = new FakeSteps();
    // 'inc' takes one input, 'y'; of two inputs, neither named so, it cannot pick one by position.
    await assert.rejects(
      execute({ kind: 'pipeline', name: 'q', steps: [leaf('inc')], map: [] }, { w: column([1]), v: column([2]) }, steps),
      {
        code: 'TROUPE_ERR_BAD_INPUT',
        message: "step 'q > inc': needs input 'y', which nothing produced (available: 'w', 'v')",
      },
    );
  });

  test('explicit wiring maps a value to the input it feeds', async () => {
    const steps = new FakeSteps();
    const plan: PlanNode = { kind: 'pipeline', name: 'p', steps: [leaf('inc')], map: [{ from: 'image', to: 'y' }] };
    assert.deepEqual(valuesOf(await execute(plan, { image: column([7]), other: column([0]) }, steps), 'z'), [8]);
  });
});

describe('execute: ensembles', { timeout: 10_000 }, () => {
  test('members run at once on the same inputs, and are combined', async () => {
    const steps = new FakeSteps();
    steps.hold('a');
    steps.hold('b');
    const trace: RunTrace = [];
    const run = execute(
      { kind: 'ensemble', name: 'e', members: [leaf('a'), leaf('b')], combine: { op: 'mean' } },
      { x: column([1, 2]) },
      steps,
      { trace },
    );
    await until('both members', () => steps.waiting('a') === 1 && steps.waiting('b') === 1);
    steps.release('b');
    steps.release('a');
    assert.deepEqual(valuesOf(await run, 'p'), [2, 4], 'mean of x and 3x');
    assert.deepEqual(trace.map((t) => t.step).sort(), ['e', 'e > a', 'e > b', 'e > combine']);
  });

  test("a failing member fails the run with that member's path", async () => {
    const steps = new FakeSteps();
    const plan: PlanNode = {
      kind: 'pipeline',
      name: 'p',
      steps: [leaf('double'), { kind: 'ensemble', name: 'e', members: [leaf('inc'), leaf('boom')], combine: { op: 'max' } }],
      map: [],
    };
    await assert.rejects(execute(plan, { x: column([1]) }, steps), { code: 'TROUPE_ERR_INFERENCE', message: /^step 'p > e > boom': / });
  });

  test('a combine that cannot join the outputs names the combine step', async () => {
    const steps = new FakeSteps();
    // Both give [rows, 1]: there is no axis 3 to concatenate along.
    const plan: PlanNode = { kind: 'ensemble', name: 'e', members: [leaf('double'), leaf('a')], combine: { op: 'concat', axis: 3 } };
    await assert.rejects(execute(plan, { x: column([1]) }, steps), { message: /^step 'e > combine': / });
  });
});

describe('execute: dataParallel', { timeout: 10_000 }, () => {
  test('rows are cut into chunks, run two per replica at a time, and joined back in order', async () => {
    const steps = new FakeSteps();
    steps.hold('double');
    const trace: RunTrace = [];
    const run = execute(
      { kind: 'dataParallel', name: 'dp', step: leaf('double'), chunk: 2, parallel: undefined },
      { x: column([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]) },
      steps,
      { trace },
    );
    // 'double' has 2 replicas: a window of 4 chunks out of 6.
    await until('the first window', () => steps.waiting('double') === 4);
    assert.deepEqual(
      steps.calls.map((c) => c.rows),
      [2, 2, 2, 2],
    );
    // Answers out of order: the output still follows the input's rows.
    steps.held.get('double')!.reverse();
    for (let i = 0; i < 6; i++) {
      await until(`chunk ${i}`, () => steps.waiting('double') > 0);
      steps.release('double');
    }
    assert.deepEqual(valuesOf(await run, 'y'), [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]);
    assert.deepEqual(
      steps.calls.map((c) => c.rows),
      [2, 2, 2, 2, 2, 1],
    );
    const chunks = trace.filter((t) => t.step.startsWith('dp > double['));
    assert.equal(chunks.length, 6);
    assert.deepEqual(chunks.map((t) => t.rows).sort(), [1, 2, 2, 2, 2, 2]);
  });

  test('`parallel` caps the chunks in flight', async () => {
    const steps = new FakeSteps();
    steps.hold('double');
    const run = execute({ kind: 'dataParallel', name: 'dp', step: leaf('double'), chunk: 1, parallel: 1 }, { x: column([1, 2, 3]) }, steps);
    for (let i = 0; i < 3; i++) {
      await until(`chunk ${i}`, () => steps.waiting('double') === 1);
      assert.equal(steps.calls.length, i + 1, 'one chunk at a time');
      steps.release('double');
    }
    assert.deepEqual(valuesOf(await run, 'y'), [2, 4, 6]);
  });

  test('a failing chunk is named by its index, and chunks not yet sent never start', async () => {
    const steps = new FakeSteps();
    steps.hold('boom');
    const run = execute(
      { kind: 'dataParallel', name: 'dp', step: leaf('boom'), chunk: 1, parallel: 2 },
      { y: column([1, 2, 3, 4, 5]) },
      steps,
    );
    await until('the first two chunks', () => steps.waiting('boom') === 2);
    steps.release('boom');
    await assert.rejects(run, { code: 'TROUPE_ERR_INFERENCE', message: /^step 'dp > boom\[0\]': / });
    steps.release('boom');
    await until('the second chunk to finish', () => steps.waiting('boom') === 0);
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(steps.calls.length, 2, 'chunks 2 to 4 were never sent');
  });

  test('zero rows run the step once, on the empty batch', async () => {
    const steps = new FakeSteps();
    const out = await execute(
      { kind: 'dataParallel', name: 'dp', step: leaf('double'), chunk: 4, parallel: undefined },
      { x: column([]) },
      steps,
    );
    assert.deepEqual(valuesOf(out, 'y'), []);
    assert.deepEqual(
      steps.calls.map((c) => c.rows),
      [0],
    );
  });
});

describe('execute: deadlines', { timeout: 10_000 }, () => {
  test('every call is given the run deadline', async () => {
    const steps = new FakeSteps();
    const deadline = Date.now() + 60_000;
    await execute({ kind: 'pipeline', name: 'p', steps: [leaf('double'), leaf('inc')], map: [] }, { x: column([1]) }, steps, { deadline });
    assert.deepEqual(
      steps.calls.map((c) => c.deadline),
      [deadline, deadline],
    );
  });

  test('a run past its deadline starts no further step', async () => {
    const steps = new FakeSteps();
    steps.hold('double');
    const deadline = Date.now() + 20;
    const run = execute({ kind: 'pipeline', name: 'p', steps: [leaf('double'), leaf('inc')], map: [] }, { x: column([1]) }, steps, {
      deadline,
    });
    await until('the first step', () => steps.waiting('double') === 1);
    // Bounded by the test's timeout; the deadline is 20 ms away.
    while (Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, deadline - Date.now()));
    steps.release('double');
    await assert.rejects(run, {
      code: 'TROUPE_ERR_DEADLINE_EXCEEDED',
      message: "step 'p > inc': not started: the run passed its deadline",
    });
    assert.deepEqual(
      steps.calls.map((c) => c.name),
      ['double'],
    );
  });

  test('a deadline already past fails the run before any call', async () => {
    const steps = new FakeSteps();
    await assert.rejects(execute(leaf('double'), { x: column([1]) }, steps, { deadline: Date.now() - 1 }), {
      code: 'TROUPE_ERR_DEADLINE_EXCEEDED',
      message: /^step 'double': not started/,
    });
    assert.equal(steps.calls.length, 0);
  });
});
