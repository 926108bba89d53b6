import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_VALUE_DEPTH, MAX_VALUE_ITEMS, connect } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';
import { RawSocket, packWithDeepArgument } from '../helpers/fuzz.js';
import { assertError, call } from '../helpers/http.js';

/**
 * Values a caller sends to a class actor, or a method sends back, are bounded before anything
 * encodes them (runtime/protocol/values.ts): a 20 KB JSON body nested 10,000 deep once overflowed the
 * head's stack in the msgpack encoder and took it down. Every door refuses such a value with a code,
 * a method's result or item past the bounds fails its call, and the head lives throughout.
 */

const JSON_HEADERS = { 'content-type': 'application/json' };

/** JSON text of 'a' wrapped in `depth` arrays (20 KB at 10,000). */
function nestedJson(depth: number): string {
  return `${'['.repeat(depth)}"a"${']'.repeat(depth)}`;
}

function nested(depth: number): unknown {
  let value: unknown = 'a';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

describe('hostile values to and from class actors', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let hostile: ActorHandle;
  let headPid: number;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    headPid = cluster.head.process.pid!;
    client = await connect(cluster.url);
    hostile = await client.actor({ name: 'hostile', module: 'test/fixtures/hostile.js', export: 'Hostile', cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  /** The head is the same process and answers. */
  async function headAlive(): Promise<void> {
    assert.ok(isAlive(headPid), 'the head exited');
    assert.equal((await call(cluster.url, 'GET', '/healthz', { timeoutMs: 10_000 })).status, 200);
  }

  test('HTTP: generate_stream, generate and method calls with arguments nested 10,000 deep are 400s; the head lives', async () => {
    const deep = nestedJson(10_000);
    const doors = [
      { path: '/v2/models/hostile/generate_stream', body: `{"text_input": ${deep}}`, what: /hostile.generate\(\): args\[0\]/ },
      { path: '/v2/models/hostile/generate', body: `{"text_input": ${deep}}`, what: /hostile.generate\(\): args\[0\]/ },
      // Past 64 KiB the body is parsed on the head's body thread: bounded there, by the same words.
      {
        path: '/v2/models/hostile/generate',
        body: `{"text_input": ${deep}${' '.repeat(100 * 1024)}}`,
        what: /hostile.generate\(\): args\[0\]/,
      },
      { path: '/api/v1/actors/hostile/echo', body: `{"args": [${nestedJson(2000)}]}`, what: /hostile.echo\(\): args\[0\]/ },
      {
        path: '/api/v1/actors/hostile/echo',
        body: `{"args": [${nestedJson(2000)}]${' '.repeat(100 * 1024)}}`,
        what: /hostile.echo\(\): args\[0\]/,
      },
      { path: '/api/v1/actors/hostile/echo/stream', body: `{"args": [${deep}]}`, what: /hostile.echo\(\): args\[0\]/ },
    ];
    for (const door of doors) {
      const answer = await call(cluster.url, 'POST', door.path, { body: door.body, headers: JSON_HEADERS });
      assertError(
        answer,
        400,
        'TROUPE_ERR_UNSENDABLE_VALUE',
        new RegExp(`${door.what.source}.*: nested deeper than ${MAX_VALUE_DEPTH} levels cannot be sent`),
      );
      await headAlive();
    }
    // A large body that is fine (parsed on the body thread) is called with its values.
    const words = Array.from({ length: 20_000 }, (_, i) => `w${i}`);
    const echoed = await call(cluster.url, 'POST', '/api/v1/actors/hostile/echo', {
      body: JSON.stringify({ args: [words] }),
      headers: JSON_HEADERS,
    });
    assert.equal(echoed.status, 200, echoed.body.toString());
    assert.deepEqual((JSON.parse(echoed.body.toString()) as { value: unknown }).value, words);
    // A class's constructor arguments, too (the spec's JSON round trip recursed).
    const spec = `{"kind": "class", "model": "test/fixtures/hostile.js#Hostile", "cpus": 0.1, "args": [${nestedJson(10_000)}]}`;
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/deep-args', { body: spec, headers: JSON_HEADERS });
    assertError(put, 400, 'TROUPE_ERR_BAD_SPEC', /args cannot be sent: args\[0\].*: nested deeper than 64 levels/);
    await headAlive();
    // Within the bound, the same doors answer.
    const fine = await call(cluster.url, 'POST', '/api/v1/actors/hostile/echo', {
      body: `{"args": [${nestedJson(MAX_VALUE_DEPTH - 2)}]}`,
      headers: JSON_HEADERS,
    });
    assert.equal(fine.status, 200, fine.body.toString());
  });

  test('SDK: deep and huge arguments are refused before they are sent, with codes; the caller and the head live', async () => {
    assert.throws(() => hostile.call('echo', nested(2000)), {
      code: 'TROUPE_ERR_UNSENDABLE_VALUE',
      message: /nested deeper than 64 levels/,
    });
    assert.throws(() => hostile.call('echo', nested(200_000)), { code: 'TROUPE_ERR_UNSENDABLE_VALUE' });
    assert.throws(() => hostile.call('echo', new Array(MAX_VALUE_ITEMS + 1).fill(0)), {
      code: 'TROUPE_ERR_UNSENDABLE_VALUE',
      message: new RegExp(`more than ${MAX_VALUE_ITEMS} items`),
    });
    assert.throws(() => hostile.stream('items', nested(2000)), { code: 'TROUPE_ERR_UNSENDABLE_VALUE' });
    assert.equal(await hostile.call('echo', 'still here'), 'still here');
  });

  test('raw client frames: arguments past the bounds are refused by the head with codes; the head lives', async () => {
    const socket = new RawSocket(`${cluster.url.replace('http', 'ws')}/v1/client`, {}, ['reply', 'streamItem']);
    await socket.opened;
    try {
      const cases = [
        { id: 'd100', depth: 100, code: 'TROUPE_ERR_UNSENDABLE_VALUE' },
        // Past what msgpack decoders take: the frame itself is refused.
        { id: 'd50000', depth: 50_000, code: 'TROUPE_ERR_BAD_FRAME' },
      ];
      for (const c of cases) {
        for (const type of ['invoke', 'stream']) {
          socket.send(packWithDeepArgument({ type, id: `${type}-${c.id}`, actor: 'hostile', method: 'echo', credit: 4 }, c.depth), true);
        }
      }
      await socket.probe('after');
      const fails = socket.received as { type: string; id: string | null; error?: { code: string; message: string } }[];
      for (const c of cases) {
        for (const type of ['invoke', 'stream']) {
          const id = c.code === 'TROUPE_ERR_BAD_FRAME' ? null : `${type}-${c.id}`;
          const fail = fails.find((m) => m.type === 'fail' && m.id === id && m.error?.code === c.code);
          assert.ok(fail, `no ${c.code} for ${type} of depth ${c.depth}: ${JSON.stringify(fails).slice(0, 500)}`);
        }
      }
      assert.deepEqual(socket.problems, []);
    } finally {
      socket.close();
    }
    await headAlive();
  });

  test('a class whose module exits as it is imported is refused like a constructor that throws; nothing stays deployed', async () => {
    await rejectsWith(
      client.actor({ name: 'exits', module: 'test/fixtures/exits-on-import.js', export: 'Never', cpus: 0.1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /called process\.exit\(3\) while loading.*; deployment 'exits' was not created/,
    );
    assert.ok(!(await client.describe()).deployments.some((d) => d.name === 'exits'));
    // The examples' entry points are in the folder `troupe up` offers: importing one starts no cluster.
    await rejectsWith(
      client.actor({ name: 'entry', module: 'examples/data-parallel/main.js', export: 'Main', cpus: 0.1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /is an example's entry point \(it starts a cluster of its own\).*; deployment 'entry' was not created/,
    );
  });

  test("a method's results and items past the bounds fail its call (UNSENDABLE_VALUE); the instance and the head live", async () => {
    const pid = await hostile.call<number>('pid');
    await rejectsWith(
      hostile.call('deep', 5000),
      'TROUPE_ERR_UNSENDABLE_VALUE',
      /the value Hostile.deep\(\) returned cannot be sent: value\[0\].*: nested deeper/,
    );
    // 600,000 objects of one member each: 1.2M items, the kind of result that held the head for seconds.
    await rejectsWith(
      hostile.call('wide', 600_000),
      'TROUPE_ERR_UNSENDABLE_VALUE',
      /the value Hostile.wide\(\) returned cannot be sent: value\[\d+\]: more than 1000000 items/,
    );
    const seen: unknown[] = [];
    await rejectsWith(
      (async () => {
        for await (const item of hostile.stream('items', 5000)) seen.push(item);
      })(),
      'TROUPE_ERR_UNSENDABLE_VALUE',
      /item 1 of Hostile.items\(\) cannot be sent: value\[0\].*: nested deeper/,
    );
    assert.deepEqual(seen, ['fine']);
    const sse = await call(cluster.url, 'POST', '/api/v1/actors/hostile/items/stream', { body: '{"args": [5000]}', headers: JSON_HEADERS });
    assert.match(sse.body.toString(), /data: "fine"[\s\S]*event: error\ndata: \{"code":"TROUPE_ERR_UNSENDABLE_VALUE"/);
    assert.equal(await hostile.call('pid'), pid);
    await headAlive();
  });
});

describe('a method that never settles', { timeout: 180_000 }, () => {
  const MAX_CALL_MS = 1000;
  let cluster: TestCluster;
  let client: Cluster;
  let hostile: ActorHandle;

  before(async () => {
    cluster = await startCluster({ agents: [[...GRAPH_AGENT, '--max-inference-ms', String(MAX_CALL_MS)]] });
    client = await connect(cluster.url);
    hostile = await client.actor({ name: 'hostile', module: 'test/fixtures/hostile.js', export: 'Hostile', cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test("fails past the agent's --max-inference-ms, and its instance restarts instead of holding every later call", async () => {
    const pid = await hostile.call<number>('pid');
    const never = hostile.call('never');
    const behind = hostile.call('pid');
    await rejectsWith(
      never,
      'TROUPE_ERR_DEADLINE_EXCEEDED',
      new RegExp(`Hostile.never\\(\\) ran past ${MAX_CALL_MS} ms, the longest a call may run .*; the instance restarts`),
    );
    // The call queued behind it on the instance was never run: it fails with the process, and says so.
    await assert.rejects(Promise.resolve(behind), { code: 'TROUPE_ERR_ACTOR_DIED' });
    const next = await waitFor(
      'a new instance',
      async () => {
        const now = await hostile.call<number>('pid');
        return now !== pid && now;
      },
      60_000,
      200,
    );
    assert.ok(isAlive(next));
    assert.equal(await hostile.call('echo', 'served'), 'served');
  });
});
