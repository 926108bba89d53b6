import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DurableStore, writeSpacingMs } from '../../head/state/durable.js';
import type { SavedActor } from '../../head/state/durable.js';
import { ModelDeploymentSchema, TroupeError, createLogger } from '../../runtime/internal.js';

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

test('a state file that cannot be read stops the head, named, and is left as it was; seven ways of being unreadable', async () => {
  const good = JSON.stringify({
    format: 1,
    savedAt: new Date().toISOString(),
    deployments: [{ name: 'ok', model: 'a.onnx' }],
    graphs: [],
    actors: [],
  });
  const variants: [what: string, write: (file: string) => Promise<void>, problem: RegExp][] = [
    ['truncated', (f) => writeFile(f, good.slice(0, good.length / 2)), /is not valid JSON/],
    ['random bytes', (f) => writeFile(f, Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7919) % 256))), /is not valid JSON/],
    ['empty', (f) => writeFile(f, ''), /is empty/],
    ['NUL-filled', (f) => writeFile(f, Buffer.alloc(4096)), /is not valid JSON/],
    ['another schema', (f) => writeFile(f, JSON.stringify({ hello: 'world' })), /is not a state file of this head at 'format'/],
    [
      'a newer format',
      (f) => writeFile(f, JSON.stringify({ ...JSON.parse(good), format: 2 })),
      /was written by a newer Troupe \(format 2; this head reads format 1\)/,
    ],
    ['a symbolic link', (f) => writeFile(`${f}.elsewhere`, good).then(() => symlink(`${f}.elsewhere`, f)), /is a symbolic link/],
  ];
  for (const [i, [what, write, problem]] of variants.entries()) {
    const home = join(dir, `unreadable-${i}`);
    await mkdir(home, { recursive: true });
    const file = join(home, 'state.json');
    await write(file);
    const before = await readFile(file).catch(() => undefined);
    await assert.rejects(DurableStore.open(home, log), (err: unknown) => {
      assert.ok(err instanceof TroupeError, `${what}: ${String(err)}`);
      assert.equal(err.code, 'TROUPE_ERR_STATE_UNREADABLE', what);
      assert.ok(err.message.includes(file), `${what}: ${err.message}`);
      assert.match(err.message, problem, what);
      assert.match(err.message, /--discard-state/, what);
      return true;
    });
    assert.deepEqual(await readFile(file).catch(() => undefined), before, `${what}: the file is left as it was`);
  }
});

test('the state before the last write is kept as state.json.prev, and a refusal names it when it reads well', async () => {
  const home = join(dir, 'previous');
  const spec = (name: string) => ModelDeploymentSchema.parse({ name, model: 'mlp.onnx' });
  let deployments = [spec('first')];
  const { store } = await DurableStore.open(home, log);
  store.track(() => ({ deployments, actors: [] }));
  store.markDirty();
  await store.flush();
  deployments = [spec('first'), spec('second')];
  store.markDirty();
  await store.close();
  assert.deepEqual((await readdir(home)).sort(), ['state.json', 'state.json.prev']);
  const prev = JSON.parse(await readFile(join(home, 'state.json.prev'), 'utf8')) as { deployments: { name: string }[] };
  assert.deepEqual(
    prev.deployments.map((d) => d.name),
    ['first'],
  );
  await writeFile(join(home, 'state.json'), '{"format": 1, "deploym');
  await assert.rejects(DurableStore.open(home, log), {
    code: 'TROUPE_ERR_STATE_UNREADABLE',
    message: new RegExp(
      `${join(home, 'state.json.prev').replace(/[.]/g, '\\.')} holds the state as it was before the last write and reads well`,
    ),
  });
});

test('--discard-state sets an unreadable file aside (never overwritten) and starts empty', async () => {
  const home = join(dir, 'discarded');
  await mkdir(home, { recursive: true });
  await writeFile(join(home, 'state.json'), 'damaged beyond repair');
  const { store, saved } = await DurableStore.open(home, log, true);
  assert.deepEqual(saved.deployments, []);
  store.markDirty();
  await store.close();
  const files = await readdir(home);
  const aside = files.find((f) => f.startsWith('state.json.discarded-'));
  assert.ok(aside, files.join(', '));
  assert.equal(await readFile(join(home, aside), 'utf8'), 'damaged beyond repair');
  // The next head reads the state this one wrote.
  assert.deepEqual((await DurableStore.open(home, log)).saved.deployments, []);
});

test('invalid entries of a readable state file are skipped (with a warning)', async () => {
  const home = join(dir, 'mixed');
  await mkdir(home, { recursive: true });
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
