import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClusterState } from '../../head/state/cluster-state.js';
import { EventFeed } from '../../head/status/event-feed.js';
import { StatusFrame } from '../../head/status/frame.js';
import { ClusterSampler } from '../../head/status/sampler.js';
import { compileGraph } from '../../runtime/internal.js';
import type { GraphView } from '../../runtime/internal.js';

// The page's header counts what `troupe status` and GET /api/v1/cluster count: it said "1 graph"
// beside "graphs (2)" when one graph was a named part of the other (drawn inside it on the page).
test("the status page's header counts every graph deployed, a named sub-graph too", () => {
  const doc = {
    graph: 'outer',
    nodes: [
      { kind: 'pipeline' as const, name: 'inner', steps: ['mlp'] },
      { kind: 'pipeline' as const, name: 'outer', steps: ['inner', 'mlp'] },
    ],
  };
  const compiled = compileGraph(doc, (name) => (name === 'mlp' ? 'model' : undefined));
  const views: GraphView[] = ['inner', 'outer'].map((name) => ({
    name,
    kind: 'pipeline',
    steps: 1,
    inputs: null,
    outputs: null,
    deployments: ['mlp'],
  }));
  const graphs = { views: () => views, plan: (name: string) => compiled.composites.get(name) };
  const state = new ClusterState();
  const frame = new StatusFrame(state, graphs, new ClusterSampler(state), new EventFeed(state, () => {}), false);
  assert.deepEqual(
    frame.graphs.map((g) => g.name),
    ['outer'],
    'the page draws the sub-graph inside its parent',
  );
  assert.equal(frame.shared.summary.graphs, 2);
});
