import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';
import { call as http } from '../helpers/http.js';
import { propertySeed, sendableValue } from '../helpers/values.js';

/**
 * Users' values through every process they cross (issue 39): from the SDK to a class actor's
 * instance through the head and back, as a method's arguments and value, as a stream's items, as
 * the checkpoint a restarted instance is handed, with the actor's frames straight to the head or
 * relayed by its agent; JSON over HTTP. Each is a seeded property (the seed and the shrunk case
 * are printed on failure; TROUPE_TEST_SEED replays one).
 */

const CLASSES = 'test/fixtures/classes.js';

async function checkAsync<T>(arbitrary: fc.Arbitrary<T>, property: (value: T) => Promise<void>, numRuns: number): Promise<void> {
  const seed = propertySeed();
  const result = await fc.check(fc.asyncProperty(arbitrary, property), { seed, numRuns });
  if (result.failed) {
    assert.fail(
      `property failed with seed ${seed} (replay with TROUPE_TEST_SEED=${seed}); shrunk case: ${fc.stringify(result.counterexample)}\n${String(result.errorInstance)}`,
    );
  }
}

async function readAll(stream: AsyncIterable<unknown>): Promise<unknown[]> {
  const items: unknown[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

for (const links of ['direct', 'relay'] as const) {
  describe(`values cross exactly (actor links: ${links})`, { timeout: 170_000 }, () => {
    let cluster: TestCluster;
    let client: Cluster;
    let echo: ActorHandle;

    before(async () => {
      cluster = await startCluster({ agents: [[...GRAPH_AGENT, ...(links === 'relay' ? ['--actor-links', 'relay'] : [])]] });
      client = await connect(cluster.url);
      echo = await client.actor({ name: 'echo', module: CLASSES, export: 'Echo', cpus: 0.1 });
    });
    after(async () => {
      await client?.close();
      await cluster?.stop();
    });

    test("a method's arguments and its value", async () => {
      await checkAsync(
        fc.array(sendableValue(), { maxLength: 4 }),
        async (args) => assert.deepStrictEqual(await echo.call('echo', ...args), args),
        60,
      );
    });

    test("a stream's items", async () => {
      await checkAsync(
        fc.array(sendableValue(), { maxLength: 4 }),
        async (args) => assert.deepStrictEqual(await readAll(echo.stream('items', ...args)), args),
        40,
      );
    });

    test('a large typed array (past the size that travels outside the frame body) both ways', async () => {
      const large = new Float64Array(50_000).map((_, i) => Math.sin(i));
      const [back] = await echo.call<[Float64Array]>('echo', large.subarray(10));
      assert.deepStrictEqual(back, large.subarray(10).slice());
    });

    test('a Future nested anywhere in an argument is resolved on the head, with its exact value', async () => {
      const inner = echo.call('echo', new Map([[1n, new Float32Array([1.5])]]));
      const back = await echo.call('echo', { deep: [new Set(['x']), { v: inner }] });
      assert.deepStrictEqual(back, [{ deep: [new Set(['x']), { v: [new Map([[1n, new Float32Array([1.5])]])] }] }]);
      const failing = echo.call('unsendable', 'function');
      await rejectsWith(
        echo.call('echo', [failing]),
        'TROUPE_ERR_UNSENDABLE_VALUE',
        /a Future inside the arguments of echo\.echo\(\) is call/,
      );
    });

    test('what cannot cross is refused at the sender, naming where it is; the instance goes on', async () => {
      assert.throws(
        () => echo.call('echo', 1, { v: () => 1 }),
        (err: unknown) =>
          err instanceof TroupeError &&
          err.code === 'TROUPE_ERR_UNSENDABLE_VALUE' &&
          /^echo\.echo\(\): args\[1\]\.v: a function cannot be sent$/.test(err.message),
      );
      for (const [kind, where] of [
        ['function', /value\.deep\[1\]: a function cannot be sent/],
        ['symbol', /value\.s: a symbol cannot be sent/],
        ['instance', /value\.at: an instance of Point cannot be sent/],
        ['deep', /nested deeper than 64 levels/],
      ] as const)
        await rejectsWith(echo.call('unsendable', kind), 'TROUPE_ERR_UNSENDABLE_VALUE', where);
      assert.deepStrictEqual(await echo.call('echo', 1), [1]);
    });
  });
}

describe('values cross exactly: checkpoints and HTTP', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let echo: ActorHandle;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
    echo = await client.actor({ name: 'echo', module: CLASSES, export: 'Echo', cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('the checkpoint a restarted instance is handed holds exactly what it kept', async () => {
    await checkAsync(
      sendableValue(),
      async (value) => {
        await echo.call('echo', value);
        await rejectsWith(echo.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /before answering/);
        const last = await waitFor('the instance back', () => echo.call('last').catch(() => undefined), 60_000);
        assert.deepStrictEqual(last, [value]);
      },
      4,
    );
  });

  test("an actor call's Future is a model run's input: its tensor arrives exactly", async () => {
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', cpus: 0.1, threads: 1 });
    const x = tensor(
      'float32',
      [1, 64],
      Float32Array.from({ length: 64 }, (_, i) => Math.cos(i)),
    );
    const direct = await client.run('mlp', { x });
    const viaActor = await client.run('mlp', { x: echo.call('give', x) });
    assert.deepStrictEqual([...viaActor.logits!.data], [...direct.logits!.data]);
    await rejectsWith(client.run('mlp', { x: echo.call('give', [1, 2]) }), 'TROUPE_ERR_BAD_INPUT', /input 'x' is not a tensor/);
  });

  test("a run's Future (or one output of it) is a method's argument, anywhere in it; a call taking that call's Future goes after it", async () => {
    const x = tensor(
      'float32',
      [1, 64],
      Float32Array.from({ length: 64 }, (_, i) => Math.sin(i)),
    );
    const run = client.run('mlp', { x });
    const outputs = await client.run('mlp', { x });
    const first = echo.call('give', { all: run, logits: [run.output('logits')] });
    const second = echo.call('give', first);
    const expected = { all: { logits: outputs.logits }, logits: [outputs.logits] };
    const plain = (v: unknown) => JSON.parse(JSON.stringify(v, (_k, t: unknown) => (t instanceof Float32Array ? [...t] : t))) as unknown;
    assert.deepStrictEqual(plain(await first), plain(expected));
    assert.deepStrictEqual(plain(await second), plain(expected));
    assert.ok(((await first) as typeof expected).logits[0]!.data instanceof Float32Array, 'a tensor arrives with its typed array');
    await rejectsWith(echo.call('give', run.output('nope')), 'TROUPE_ERR_BAD_INPUT', /has no output 'nope' \(its outputs: logits\)/);
    assert.throws(() => echo.stream('items', run), /a stream's arguments take no Future of a run/);
  });

  test('JSON over HTTP arrives and comes back as sent; what JSON cannot say is refused, not answered as null', async () => {
    await checkAsync(
      fc.array(sendableValue({ json: true }), { maxLength: 4 }),
      async (args) => {
        const answer = await http(cluster.url, 'POST', '/api/v1/actors/echo/echo', {
          body: JSON.stringify({ args }),
          headers: { 'content-type': 'application/json' },
        });
        assert.equal(answer.status, 200, answer.body.toString());
        assert.deepStrictEqual((answer.json as { value: unknown }).value, JSON.parse(JSON.stringify(args)));
      },
      40,
    );
    const deep = http(cluster.url, 'POST', '/api/v1/actors/echo/echo', {
      // Written as text: 5,000 levels are past what this process's JSON.stringify recurses through.
      body: `{"args": [${'['.repeat(5000)}${']'.repeat(5000)}]}`,
      headers: { 'content-type': 'application/json' },
    });
    const refused = await deep;
    assert.equal(refused.status, 400);
    assert.equal((refused.json as { code: string }).code, 'TROUPE_ERR_UNSENDABLE_VALUE');
    assert.match((refused.json as { error: string }).error, /^echo\.echo\(\): args\[0\]\[0\].*: nested deeper than 64 levels/);
    const big = await http(cluster.url, 'POST', '/api/v1/actors/echo/unsendable', {
      body: JSON.stringify({ args: ['instance'] }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(big.status, 400);
    assert.match(big.body.toString(), /value\.at: an instance of Point cannot be sent/);
    await echo.call('echo', new Map([[1, 2]]));
    const map = await http(cluster.url, 'POST', '/api/v1/actors/echo/last', {});
    assert.equal(map.status, 400, map.body.toString());
    assert.match(map.body.toString(), /a Map has no JSON form: call the method with the SDK/);
  });
});
