import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DurableStore, writeSpacingMs } from '../../head/state/durable.js';
import type { SavedActor } from '../../head/state/durable.js';
import { ModelDeploymentSchema, createLogger } from '../../runtime/internal.js';

const log = createLogger('test');
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-durable-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const actor: SavedActor = {
  id: 'a1b2c3d4e5f6',
  name: 'mlp#0',
  deployment: 'mlp',
  node: 'node-a',
  gpus: [1],
  gpuShare: 0.5,
  cpus: 1,
  memoryBytes: 0,
  device: 'gpu:1',
  pid: 4242,
  restarts: 2,
  secret: 'abcdefghijklmnopqrstuvwxyz012345',
};

test('an empty data directory holds nothing, and nothing is written until something changes', async () => {
  const { saved } = await DurableStore.open(join(dir, 'empty'), log);
  assert.deepEqual(saved, { deployments: [], graphs: new Map(), actors: [] });
  assert.equal(await stat(join(dir, 'empty')).catch(() => undefined), undefined);
});

test('state is written atomically (0600, no temporary file left) and read back by the next head', async () => {
  const home = join(dir, 'head');
  const spec = ModelDeploymentSchema.parse({ name: 'mlp', model: 'mlp.onnx', replicas: 2, memory: '1Mi', batch: { maxSize: 8 } });
  const { store } = await DurableStore.open(home, log);
  store.track(() => ({ deployments: [spec], actors: [actor] }));
  store.setGraph('chain', { graph: 'chain', nodes: [{ kind: 'pipeline', name: 'chain', steps: ['mlp'] }] });
  for (let i = 0; i < 50; i++) store.markDirty();
  await store.flush();
  assert.deepEqual(await readdir(home), ['state.json']);
  assert.equal((await stat(join(home, 'state.json'))).mode & 0o777, 0o600);
  await store.close();

  const { saved } = await DurableStore.open(home, log);
  assert.deepEqual(saved.deployments, [spec]);
  assert.deepEqual(saved.actors, [actor]);
  assert.deepEqual([...saved.graphs.keys()], ['chain']);
});

test('saves asked for while a write runs share one more write of the latest state, not one write each', async () => {
  const home = join(dir, 'coalesced');
  const { store } = await DurableStore.open(home, log);
  let version = 0;
  let snapshots = 0;
  store.track(() => {
    snapshots++;
    return { deployments: [], actors: [{ ...actor, restarts: version }] };
  });
  // Twenty changes, each flushed at once: the first starts a write, the other nineteen find it
  // running and ask for one more, which takes the state as it is when that write begins.
  const flushed: Promise<void>[] = [];
  for (let i = 0; i < 20; i++) {
    version = i;
    store.markDirty();
    flushed.push(store.flush());
  }
  await Promise.all(flushed);
  assert.equal(snapshots, 2);
  const onDisk = JSON.parse(await readFile(join(home, 'state.json'), 'utf8')) as { actors: SavedActor[] };
  assert.equal(onDisk.actors[0]?.restarts, 19);
  await store.close();
});

test('a graph removed is gone after a restart; writes after close are ignored', async () => {
  const home = join(dir, 'graphs');
  const first = await DurableStore.open(home, log);
  first.store.setGraph('g', { graph: 'g', nodes: [] });
  first.store.deleteGraph('g');
  await first.store.close();
  first.store.setGraph('late', { graph: 'late', nodes: [] });
  const { saved } = await DurableStore.open(home, log);
  assert.deepEqual([...saved.graphs.keys()], []);
});

test('an unreadable or invalid state file is ignored (with a warning), and invalid entries are skipped', async () => {
  const home = join(dir, 'broken');
  const { store } = await DurableStore.open(home, log);
  store.markDirty();
  await store.close();
  await writeFile(join(home, 'state.json'), '{ not json');
  assert.deepEqual((await DurableStore.open(home, log)).saved.deployments, []);
  const mixed = {
    format: 1,
    savedAt: new Date().toISOString(),
    deployments: [
      { name: 'ok', model: 'a.onnx' },
      { name: '../bad', model: 'a.onnx' },
      { name: 'x', model: 'a.onnx', unknown: 1 },
    ],
    graphs: [],
    actors: [actor, { ...actor, secret: 'short' }],
  };
  await writeFile(join(home, 'state.json'), JSON.stringify(mixed));
  const { saved } = await DurableStore.open(home, log);
  assert.deepEqual(
    saved.deployments.map((d) => d.name),
    ['ok'],
  );
  assert.equal(saved.actors.length, 1);
  assert.ok(!(await readFile(join(home, 'state.json'), 'utf8')).includes('token'));
});

test('writes that hold the event loop are spaced by four times what they held it for; cheap ones are not spaced', async () => {
  assert.equal(writeSpacingMs(0.3), 0);
  assert.equal(writeSpacingMs(4.9), 0);
  assert.equal(writeSpacingMs(250), 1000);
  // A state that costs 10 ms to snapshot: a change during its write is still written, after the pause.
  const home = join(dir, 'spaced');
  const { store } = await DurableStore.open(home, log);
  let version = 0;
  const written: number[] = [];
  store.track(() => {
    const until = performance.now() + 10;
    while (performance.now() < until);
    written.push(version);
    return { deployments: [], actors: [{ ...actor, restarts: version }] };
  });
  store.markDirty();
  const first = store.flush();
  version = 1;
  store.markDirty();
  await Promise.all([first, store.flush()]);
  assert.deepEqual(written, [0, 1]);
  const onDisk = JSON.parse(await readFile(join(home, 'state.json'), 'utf8')) as { actors: SavedActor[] };
  assert.equal(onDisk.actors[0]?.restarts, 1);
  await store.close();
});
