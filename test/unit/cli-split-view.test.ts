import assert from 'node:assert/strict';
import { test } from 'node:test';
import { progressLine } from '../../cli/deploy.js';
import { formatCluster } from '../../cli/status.js';
import type { DeploymentView } from '../../runtime/internal.js';

const view = (name: string, replicas: number, ready: number, extra: Partial<DeploymentView> = {}): DeploymentView => ({
  name,
  model: 'mlp.onnx',
  replicas,
  state: ready >= replicas ? 'READY' : 'DEPLOYING',
  metadata: null,
  queued: 0,
  requests: { ok: 0, failed: {}, p50Ms: null, p99Ms: null },
  actors: Array.from({ length: ready }, (_, i) => ({
    id: `${name}-${i}`,
    name: `${name}#${i}`,
    deployment: name,
    state: 'READY' as const,
    reason: null,
    node: 'n1',
    gpus: [],
    device: 'cpu',
    pid: 100 + i,
    restarts: 0,
    inFlight: 0,
    visibleDevices: '',
    gpuMemoryMiB: null,
    stats: null,
  })),
  ...extra,
});

// A split runs no replica itself (its own spec says replicas: 1 by default): shown alone, it read
// "ranker: 0/1 READY · no actors yet" under "deployment 'ranker' is READY".
const ranker = view('ranker', 1, 0, {
  state: 'READY',
  versions: [
    { version: 'v1', model: 'mlp.onnx', weight: 90, deployment: 'ranker.v1', state: 'READY' },
    { version: 'v2', model: 'mlp.onnx', weight: 10, deployment: 'ranker.v2', state: 'READY' },
  ],
});
const v1 = view('ranker.v1', 2, 2, { versionOf: 'ranker' });
const v2 = view('ranker.v2', 1, 1, { versionOf: 'ranker' });

test("a split's progress line counts its versions' replicas, or names their states when their views are not at hand", () => {
  const byName = new Map([v1, v2].map((v) => [v.name, v]));
  assert.equal(
    progressLine(ranker, byName),
    'ranker: 3/3 READY across its versions · v1 90% (ranker.v1 2/2 READY), v2 10% (ranker.v2 1/1 READY)',
  );
  assert.equal(progressLine(ranker), 'ranker: split between versions · v1 90% (ranker.v1 READY), v2 10% (ranker.v2 READY)');
  assert.equal(progressLine(v2), 'ranker.v2: 1/1 READY · ranker.v2#0 READY on n1 (pid 100)');
});

test("troupe status shows a split's replicas as its versions'", () => {
  const text = formatCluster({ nodes: [], deployments: [ranker, v1, v2], events: [] });
  assert.match(text, /^ {2}ranker +READY +3\/3 READY {2}split: v1 90% \(ranker\.v1 2\/2 READY\), v2 10% \(ranker\.v2 1\/1 READY\)$/m);
  assert.match(text, /^ {2}ranker\.v1 +READY +2\/2 READY {2}model mlp\.onnx$/m);
});
