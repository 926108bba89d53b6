import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';

const CLASSES = 'test/fixtures/classes.js';

describe('class actors: instances of a class, their methods called by name', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let counter: ActorHandle;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
    counter = await client.actor({ name: 'counter', module: CLASSES, export: 'Counter', args: [10], cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('an instance lives in a process of its own and keeps its state between calls', async () => {
    const pid = await counter.call<number>('pid');
    assert.ok(pid !== process.pid && isAlive(pid));
    const view = (await client.describe()).deployments.find((d) => d.name === 'counter')!;
    assert.equal(view.actors[0]!.pid, pid);
    assert.equal(view.model, `${CLASSES}#Counter`);
    const first = await counter.call<number>('add', 5);
    assert.equal(await counter.call('add', 1), first + 1);
    assert.equal(await counter.call('total'), first + 1);
  });

  test('calls to one instance run one at a time, in the order they were made', async () => {
    // Each call waits less than the one before: run at once, they would finish in reverse.
    const calls = ['a', 'b', 'c', 'd'].map((item, i) => counter.call<string[]>('append', item, 80 - i * 20));
    const logs = await Promise.all(calls);
    const tail = logs.at(-1)!.slice(-4);
    assert.deepEqual(tail, ['a', 'b', 'c', 'd']);
    logs.forEach((log, i) => assert.deepEqual(log.slice(-(i + 1)), tail.slice(0, i + 1)));
  });

  test("a call's Future passed as an argument is resolved on the head", async () => {
    const before = await counter.call<number>('total');
    const inner = counter.call<number>('add', 1);
    // `add(inner)` adds the running total inner returned: before + 1, so the total doubles plus 2.
    const outer = counter.call<number>('add', inner);
    assert.equal(await outer, 2 * (before + 1));
    const failing = counter.call('fail', 'no luck');
    await rejectsWith(
      counter.call('add', failing),
      'TROUPE_ERR_METHOD_FAILED',
      /argument 0 of counter.add\(\) is call .* failed with TROUPE_ERR_METHOD_FAILED: Counter.fail\(\) threw: no luck/,
    );
    // A run's Future is fetched by this client and its outputs passed on; a failed run fails the call.
    const run = client.run('nope', { x: tensor('float32', [1], new Float32Array(1)) });
    await rejectsWith(counter.call('add', run), 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /nope/);
  });

  test('errors name the method: unknown, throwing, or returning what cannot be sent', async () => {
    await rejectsWith(
      counter.call('nothing'),
      'TROUPE_ERR_UNKNOWN_METHOD',
      /class 'Counter' has no method 'nothing' \(its methods: add, append, crash, fail, pid, total, unsendable\)/,
    );
    await rejectsWith(counter.call('_private'), 'TROUPE_ERR_BAD_MESSAGE', /method/);
    await rejectsWith(counter.call('fail', 'bad day'), 'TROUPE_ERR_METHOD_FAILED', /Counter.fail\(\) threw: bad day/);
    await rejectsWith(
      counter.call('unsendable'),
      'TROUPE_ERR_UNSENDABLE_VALUE',
      /^the value Counter.unsendable\(\) returned cannot be sent: value\.format: a function cannot be sent$/,
    );
    // The instance is unharmed by its failed calls.
    assert.equal(typeof (await counter.call('total')), 'number');
  });

  test('a class actor takes no tensors, and a model takes no method calls', async () => {
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', cpus: 0.1, threads: 1 });
    await rejectsWith(
      client.actorHandle('mlp').call('run'),
      'TROUPE_ERR_NOT_A_CLASS_ACTOR',
      /'mlp' is a model deployment, not a class actor/,
    );
    await rejectsWith(
      client.run('counter', { x: tensor('float32', [1, 64], new Float32Array(64)) }),
      'TROUPE_ERR_BAD_REQUEST',
      /'counter' is a class actor: it takes method calls \(cluster\.actorHandle\('counter'\)\.call\(method, \.\.\.args\)/,
    );
    // A class actor's module is a class module in what goes wrong (it was called an fn module).
    await rejectsWith(
      client.actor({ name: 'absent', module: 'test/fixtures/nope.js', export: 'Nope', cpus: 0.1 }),
      'TROUPE_ERR_MODEL_PATH',
      /class module 'test\/fixtures\/nope.js' not found in the agent's module directory/,
    );
    // The slip that hint once led to: a name where actor() takes a spec, answered with the call that works.
    await rejectsWith(client.actor('counter' as never), 'TROUPE_ERR_BAD_SPEC', /use cluster\.actorHandle\('counter'\)$/);
    await rejectsWith(
      client.actorHandle('ghost').call('x'),
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /no actor named 'ghost' \(class actors: 'counter'\)/,
    );
    // Triton's clients see what it is: code of Troupe's taking no tensors, not an ONNX model.
    const meta = (await (await fetch(`${cluster.url}/v2/models/counter`)).json()) as { platform: string; inputs: unknown[] };
    assert.deepEqual([meta.platform, meta.inputs], ['troupe_class', []]);
    const config = (await (await fetch(`${cluster.url}/v2/models/counter/config`)).json()) as { platform: string; backend: string };
    assert.deepEqual([config.platform, config.backend], ['', 'troupe_class']);
    const model = (await (await fetch(`${cluster.url}/v2/models/mlp/config`)).json()) as { platform: string; backend: string };
    assert.deepEqual([model.platform, model.backend], ['onnxruntime_onnx', 'onnxruntime']);
  });

  test('a client closed with close() refuses its later calls as closed, not as a retryable lost connection', async () => {
    const second = await connect(cluster.url);
    assert.equal(typeof (await second.actorHandle('counter').call('total')), 'number');
    await second.close();
    for (const late of [() => second.actorHandle('counter').call('total'), () => second.run('counter', {})]) {
      await assert.rejects(
        async () => await late(),
        (err: unknown) => {
          assert.ok(err instanceof TroupeError, String(err));
          assert.equal(err.code, 'TROUPE_ERR_CLIENT_CLOSED');
          assert.equal(err.retryable, false);
          assert.match(err.message, /this client was closed \(close\(\)\): connect\(\) again/);
          return true;
        },
      );
    }
  });

  test('replacing the actor with other constructor args replaces its instances, which are built with them', async () => {
    const spec = { name: 'restarted-with', module: CLASSES, export: 'Counter', cpus: 0.1 };
    const built = await client.actor({ ...spec, args: [1] });
    assert.equal(await built.call<number>('total'), 1);
    const again = await client.actor({ ...spec, args: [500] }, { replace: true });
    // Replaced and READY: its instances are the new ones (the one built with [1] had kept answering 1).
    assert.equal(await again.call<number>('total'), 500);
    await client.undeploy('restarted-with');
  });

  test('classes that cannot be built, and args that are not JSON, are refused at deploy', async () => {
    await rejectsWith(
      client.actor({ name: 'picky', module: CLASSES, export: 'Picky', args: ['big'], cpus: 0.1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /new Picky\(...args\) threw: size must be a number, got string/,
    );
    await rejectsWith(
      client.actor({ name: 'number', module: CLASSES, export: 'notAClass', cpus: 0.1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /class 'notAClass' of test\/fixtures\/classes.js is not an exported class/,
    );
    await rejectsWith(
      client.actor({ name: 'escape', module: '../../etc/passwd.js', export: 'X', cpus: 0.1 }),
      'TROUPE_ERR_MODEL_PATH',
      /outside the agent's module directory/,
    );
    await rejectsWith(
      client.actor({ name: 'dates', module: CLASSES, export: 'Counter', args: [new Date(0)], cpus: 0.1 }),
      'TROUPE_ERR_BAD_SPEC',
      /args are not plain JSON values/,
    );
    await rejectsWith(
      client.deploy({
        name: 'split',
        kind: 'class',
        model: `${CLASSES}#Counter`,
        versions: [{ version: 'a', model: `${CLASSES}#Counter`, weight: 100 }],
      }),
      'TROUPE_ERR_BAD_SPEC',
      /a class actor takes no versions/,
    );
  });

  test('an instance that cannot be placed is PENDING with the reason, like any actor', async () => {
    const view = await client.deploy({ name: 'huge', kind: 'class', model: `${CLASSES}#Counter`, cpus: 1000 }, { wait: false });
    assert.equal(view.actors[0]!.state, 'PENDING');
    assert.match(view.actors[0]!.reason ?? '', /cpu/i);
    await rejectsWith(
      client.actorHandle('huge').withOptions({ timeoutMs: 300 }).call('total'),
      'TROUPE_ERR_DEADLINE_EXCEEDED',
      /actor 'huge': deadline passed/,
    );
    await client.undeploy('huge');
  });
});
