import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { dataParallel, ensemble, fn, model, pipeline, toGraphDocument } from '../../runtime/internal.js';
import { compileGraph } from '../../runtime/internal.js';
import type { GraphStep } from '../../runtime/internal.js';
import { graphDag } from '../../head/status/dag.js';
import type { Dag } from '../../head/status/client/protocol.js';

function dagOf(root: GraphStep): Dag {
  return graphDag(compileGraph(toGraphDocument(root)).root);
}

/** Edges by label, which is what a person reads off the drawing. */
function edges(dag: Dag): string[] {
  const label = new Map(dag.nodes.map((n) => [n.id, n.label]));
  return dag.edges.map((e) => `${label.get(e.from)} -> ${label.get(e.to)}`).sort();
}

describe('graphDag: a graph plan as boxes and arrows for the status page', () => {
  test('a pipeline is a chain from the inputs to the outputs', () => {
    const dag = dagOf(pipeline('chain', [model('a', { path: 'a.onnx' }), fn('f', 'm.js#f'), model('b', { path: 'b.onnx' })]));
    assert.deepEqual(edges(dag), ['a -> f', 'b -> outputs', 'f -> b', 'inputs -> a'].sort());
    assert.deepEqual(
      dag.nodes.map((n) => [n.kind, n.label, n.deployment ?? null]),
      [
        ['input', 'inputs', null],
        ['model', 'a', 'a'],
        ['fn', 'f', 'f'],
        ['model', 'b', 'b'],
        ['output', 'outputs', null],
      ],
    );
    assert.deepEqual(dag.groups, [], 'the root is the drawing itself, not a box in it');
  });

  test('an ensemble fans out to its members and back into its combine step, inside a box named after it', () => {
    const vote = ensemble('vote', [model('m1', { path: 'm1.onnx' }), model('m2', { path: 'm2.onnx' })], { combine: { mean: [0.7, 0.3] } });
    const dag = dagOf(pipeline('scorer', [model('enc', { path: 'enc.onnx' }), vote]));
    assert.deepEqual(
      edges(dag),
      [
        'enc -> m1',
        'enc -> m2',
        'inputs -> enc',
        'm1 -> weighted mean (0.7, 0.3)',
        'm2 -> weighted mean (0.7, 0.3)',
        'weighted mean (0.7, 0.3) -> outputs',
      ].sort(),
    );
    assert.deepEqual(
      dag.groups.map((g) => g.label),
      ['ensemble vote'],
    );
    const group = dag.groups[0]!.id;
    assert.deepEqual(
      dag.nodes
        .filter((n) => n.group === group)
        .map((n) => n.label)
        .sort(),
      ['m1', 'm2', 'weighted mean (0.7, 0.3)'],
    );
  });

  test('a fn combine step is a box calling its deployment; a data-parallel step sits between a split and a concat', () => {
    const dag = dagOf(
      dataParallel(
        'bulk',
        ensemble('both', [model('m1', { path: 'm1.onnx' }), model('m2', { path: 'm2.onnx' })], { combine: fn('join', 'm.js#join') }),
        { chunk: 32 },
      ),
    );
    assert.deepEqual(
      edges(dag),
      [
        'concat chunks -> outputs',
        'inputs -> split: 32 rows a chunk',
        'join -> concat chunks',
        'm1 -> join',
        'm2 -> join',
        'split: 32 rows a chunk -> m1',
        'split: 32 rows a chunk -> m2',
      ].sort(),
    );
    assert.equal(dag.nodes.find((n) => n.label === 'join')?.deployment, 'join');
    assert.deepEqual(
      dag.groups.map((g) => g.label),
      ['ensemble both'],
    );
  });

  test('a step used twice is drawn twice, once per call', () => {
    const a = model('a', { path: 'a.onnx' });
    const dag = dagOf(pipeline('twice', [a, a]));
    assert.equal(dag.nodes.filter((n) => n.deployment === 'a').length, 2);
    assert.deepEqual(edges(dag), ['a -> a', 'a -> outputs', 'inputs -> a'].sort());
  });
});
