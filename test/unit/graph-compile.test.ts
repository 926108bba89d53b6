import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  GraphDocumentSchema,
  compileGraph,
  dataParallel,
  ensemble,
  fn,
  inferSignature,
  model,
  pipeline,
  sourceOf,
  toGraphDocument,
} from '../../runtime/internal.js';
import type { GraphDocument, LeafInfo, ModelMetadata } from '../../runtime/internal.js';

const meta = (inputs: [string, string, (number | string)[]][], outputs: [string, string, (number | string)[]][]): ModelMetadata => ({
  inputs: inputs.map(([name, dtype, shape]) => ({ name, dtype, shape })),
  outputs: outputs.map(([name, dtype, shape]) => ({ name, dtype, shape })),
});
const MODELS: Record<string, LeafInfo> = {
  mlp: { kind: 'model', metadata: meta([['x', 'float32', ['N', 64]]], [['logits', 'float32', ['N', 10]]]) },
  wide: { kind: 'model', metadata: meta([['x', 'float32', ['N', 64]]], [['logits', 'float32', ['N', 12]]]) },
  enc: { kind: 'model', metadata: meta([['x', 'float32', ['N', 64]]], [['h', 'float32', ['N', 64]]]) },
  add: {
    kind: 'model',
    metadata: meta(
      [
        ['a', 'float32', ['N', 64]],
        ['b', 'float32', ['N', 64]],
      ],
      [['sum', 'float32', ['N', 64]]],
    ),
  },
  one: { kind: 'model', metadata: meta([['x', 'float32', [1, 64]]], [['y', 'float32', [1, 10]]]) },
  free: { kind: 'fn', metadata: { inputs: [], outputs: [] } },
};
const leaf = (name: string) => MODELS[name] ?? { kind: 'model' as const, metadata: null };
const deployed = (name: string) => (MODELS[name] ? MODELS[name]!.kind : undefined);
const check = (doc: GraphDocument) => {
  const c = compileGraph(GraphDocumentSchema.parse(doc), deployed);
  return inferSignature(c.root, leaf);
};

test('the builder emits the one JSON form, children first, and JSON.stringify gives the same', () => {
  const g = pipeline('p', [
    fn('prep', 'm.js#prep'),
    ensemble('e', [model('a', { path: 'a.onnx', replicas: 2 }), model('b', { path: 'b.onnx' })], { combine: 'vote' }),
  ]);
  const doc = toGraphDocument(g);
  assert.deepEqual(doc, {
    graph: 'p',
    nodes: [
      { kind: 'fn', name: 'prep', fn: 'm.js#prep' },
      { kind: 'model', name: 'a', model: 'a.onnx', replicas: 2 },
      { kind: 'model', name: 'b', model: 'b.onnx' },
      { kind: 'ensemble', name: 'e', members: ['a', 'b'], combine: { op: 'vote' } },
      { kind: 'pipeline', name: 'p', steps: ['prep', 'e'] },
    ],
  });
  assert.deepEqual(JSON.parse(JSON.stringify(g)), doc);
  assert.ok(GraphDocumentSchema.safeParse(doc).success);
  assert.throws(
    () => toGraphDocument(pipeline('q', [model('a', { path: 'a.onnx' }), model('a', { path: 'other.onnx' })])),
    /two different steps are named 'a'/,
  );
  assert.throws(() => dataParallel('d', model('a'), { chunk: 0 }), /chunk/);
});

test('compile resolves names, shares nodes, counts calls, and lists what to deploy', () => {
  const c = compileGraph(
    GraphDocumentSchema.parse(
      toGraphDocument(pipeline('p', [model('mlp'), ensemble('e', [model('x1', { path: 'x1.onnx' }), model('mlp')], { combine: 'mean' })])),
    ),
    deployed,
  );
  assert.equal(c.steps, 3);
  assert.deepEqual([...c.composites.keys()].sort(), ['e', 'p']);
  assert.deepEqual(
    c.deployments.map((d) => d.name),
    ['x1'],
  );
  assert.throws(
    () => compileGraph({ graph: 'x', nodes: [{ kind: 'pipeline', name: 'p', steps: ['mlp'] }] }, deployed),
    /graph 'x' names no node/,
  );
  assert.throws(
    () =>
      compileGraph(
        {
          graph: 'p',
          nodes: [
            { kind: 'pipeline', name: 'p', steps: ['mlp'] },
            { kind: 'pipeline', name: 'p', steps: ['mlp'] },
          ],
        },
        deployed,
      ),
    /defined twice/,
  );
  assert.throws(
    () => compileGraph({ graph: 'mlp', nodes: [{ kind: 'pipeline', name: 'mlp', steps: ['enc'] }] }, deployed),
    /pipeline 'mlp' has the name of a deployed model/,
  );
  assert.throws(
    () =>
      compileGraph(
        { graph: 'p', nodes: [{ kind: 'pipeline', name: 'p', steps: ['mlp'], map: [{ step: 'zz', from: 'a', to: 'b' }] }] },
        deployed,
      ),
    /maps 'a' to 'b' of step 'zz', which is not one of its steps/,
  );
  assert.throws(
    () => compileGraph({ graph: 'e', nodes: [{ kind: 'ensemble', name: 'e', members: ['mlp', 'mlp'], combine: { op: 'max' } }] }, deployed),
    /lists member 'mlp' twice/,
  );
  assert.throws(
    () =>
      compileGraph({ graph: 'e', nodes: [{ kind: 'ensemble', name: 'e', members: ['mlp'], combine: { op: 'fn', fn: 'enc' } }] }, deployed),
    /combines with 'enc', which is a model, not a fn/,
  );
  assert.throws(
    () => compileGraph({ graph: 'm', nodes: [{ kind: 'model', name: 'm', replicas: 2 }] }, deployed),
    /model 'm' has no model path/,
  );
  assert.throws(
    () => compileGraph({ graph: 'mlp', nodes: [{ kind: 'model', name: 'mlp', replicas: 2 }] }, deployed),
    /names an existing deployment .* takes no deployment options \(replicas\)/,
  );
});

test('cycles are found however long, and named', () => {
  const doc: GraphDocument = {
    graph: 'a',
    nodes: [
      { kind: 'pipeline', name: 'a', steps: ['mlp', 'b'] },
      { kind: 'ensemble', name: 'b', members: ['c'], combine: { op: 'max' } },
      { kind: 'dataParallel', name: 'c', step: 'a', chunk: 4 },
    ],
  };
  assert.throws(() => compileGraph(doc, deployed), /graph has a cycle: a > b > c > a/);
});

test('wiring: map, then the previous step by name, then by position, then any earlier value', () => {
  const ctx = { step: 's', wants: 1, previous: ['logits'], has: (n: string) => ['x', 'logits', 'p'].includes(n), map: [] };
  assert.deepEqual(sourceOf('logits', ctx), { rule: 'name', name: 'logits' });
  assert.deepEqual(sourceOf('x', ctx), { rule: 'position', name: 'logits' });
  assert.deepEqual(sourceOf('x', { ...ctx, wants: 2 }), { rule: 'earlier', name: 'x' });
  assert.deepEqual(sourceOf('x', { ...ctx, map: [{ step: 's', from: 'p', to: 'x' }] }), { rule: 'map', name: 'p' });
  assert.deepEqual(sourceOf('x', { ...ctx, map: [{ step: 'other', from: 'p', to: 'x' }] }), { rule: 'position', name: 'logits' });
  assert.equal(sourceOf('q', { ...ctx, wants: 2 }), undefined);
});

test('signatures: pipelines connect by the wiring rules and refuse mismatches, naming step and tensor', () => {
  const sig = check({ graph: 'p', nodes: [{ kind: 'pipeline', name: 'p', steps: ['enc', 'mlp'] }] });
  assert.deepEqual(
    sig.outputs?.map((o) => o.name),
    ['logits'],
  );
  assert.throws(
    () => check({ graph: 'p', nodes: [{ kind: 'pipeline', name: 'p', steps: ['mlp', 'enc'] }] }),
    /step 'enc' input 'x' expects float32\[N,64\], but gets 'logits' float32\[N,10\] from step 'mlp'/,
  );
  assert.throws(
    () => check({ graph: 'p', nodes: [{ kind: 'pipeline', name: 'p', steps: ['mlp', 'add'] }] }),
    /step 'add' needs input 'a' float32\[N,64\], which nothing produces/,
  );
  // The first step's input stays available to later steps; a map names the other.
  const skip = check({
    graph: 'p',
    nodes: [
      {
        kind: 'pipeline',
        name: 'p',
        steps: ['enc', 'add'],
        map: [
          { from: 'h', to: 'a' },
          { from: 'x', to: 'b' },
        ],
      },
    ],
  });
  assert.deepEqual(
    skip.outputs?.map((o) => o.name),
    ['sum'],
  );
  // A dynamic fn leaves what follows unchecked instead of refusing it.
  assert.doesNotThrow(() => check({ graph: 'p', nodes: [{ kind: 'pipeline', name: 'p', steps: ['free', 'add'] }] }));
});

test('signatures: ensembles combine compatible outputs; data-parallel needs a batch axis that fits', () => {
  const e = (combine: object, members = ['mlp', 'mlp2']) =>
    ({ graph: 'e', nodes: [{ kind: 'ensemble', name: 'e', members, combine }] }) as GraphDocument;
  MODELS.mlp2 = MODELS.mlp!;
  assert.deepEqual(check(e({ op: 'vote' })).outputs, [{ name: 'logits', dtype: 'int64', shape: ['N'] }]);
  assert.deepEqual(check(e({ op: 'concat', axis: -1 })).outputs, [{ name: 'logits', dtype: 'float32', shape: ['N', 20] }]);
  assert.throws(
    () => check(e({ op: 'mean' }, ['mlp', 'wide'])),
    /ensemble 'e' cannot mean output 'logits': member 'wide' gives float32\[N,12\]/,
  );
  assert.deepEqual(check(e({ op: 'concat', axis: 1 }, ['mlp', 'wide'])).outputs, [{ name: 'logits', dtype: 'float32', shape: ['N', 22] }]);
  assert.deepEqual(check({ graph: 'd', nodes: [{ kind: 'dataParallel', name: 'd', step: 'mlp', chunk: 8 }] }).inputs, [
    { name: 'x', dtype: 'float32', shape: ['batch', 64] },
  ]);
  assert.throws(
    () => check({ graph: 'd', nodes: [{ kind: 'dataParallel', name: 'd', step: 'one', chunk: 8 }] }),
    /input 'x' has a fixed batch size of 1 .* set chunk to 1/,
  );
});

test('the builders refuse what JavaScript may pass them with TROUPE_ERR_BAD_SPEC naming it, never a bare TypeError', () => {
  const a = model('mlp', { path: 'mlp.onnx' });
  const cases: [string, () => unknown, RegExp][] = [
    [
      "a combine option that is a string we don't know",
      () => ensemble('e', [a], { combine: 'nope' as never }),
      /unknown combine option "nope"/,
    ],
    ['a combine option that is a number', () => ensemble('e', [a], { combine: 3 as never }), /unknown combine option 3/],
    ['ensemble options left out', () => ensemble('e', [a], undefined as never), /options must be an object/],
    ['members that are no array', () => ensemble('e', a as never, { combine: 'mean' }), /members must be an array of steps/],
    ['a member that is no step', () => ensemble('e', [a, 'b' as never], { combine: 'mean' }), /members\[1\] is not a step/],
    ['pipeline steps that are no array', () => pipeline('p', undefined as never), /steps must be an array of steps/],
    ['a pipeline step that is no step', () => pipeline('p', [a, { name: 'x' } as never]), /steps\[1\] is not a step/],
    ['a dataParallel step that is no step', () => dataParallel('d', null as never, { chunk: 4 }), /dataParallel 'd': is not a step/],
  ];
  for (const [what, build, message] of cases)
    assert.throws(build, (err: Error & { code?: string }) => err.code === 'TROUPE_ERR_BAD_SPEC' && message.test(err.message), what);
});
