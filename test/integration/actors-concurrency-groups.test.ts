import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster, ClusterView, ModelDeploymentInput } from '../../runtime/internal.js';
import { formatCluster } from '../../cli/status.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';
import { assertError, call } from '../helpers/http.js';

/**
 * Concurrency groups as a Ray user writes them (Ray: `@ray.remote(concurrency_groups={...})`,
 * `@ray.method(concurrency_group=...)`, `.options(concurrency_group=...)`): docs/actors.md,
 * "Concurrency groups". Overlap is counted by the instance itself, never timed.
 */
const PARITY = 'test/fixtures/ray-parity.js';
const JSON_HEADERS = { 'content-type': 'application/json' };

describe('class actors: concurrency groups', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('io calls overlap up to their limit and never wait behind compute; compute runs one at a time; describe() shows the groups', async () => {
    // The class puts fetch in io (limit 4) and crunch in compute (limit 1); the spec wins for io: 2.
    const grouped = await client.actor({
      name: 'grouped',
      module: PARITY,
      export: 'Grouped',
      cpus: 0.1,
      concurrencyGroups: { io: { maxConcurrency: 2 } },
    });
    const view = (await client.describe()).deployments.find((d) => d.name === 'grouped')!.actors[0]!;
    assert.deepEqual(view.concurrencyGroups, {
      default: { maxConcurrency: 1, methods: ['callSelf', 'feed', 'inside', 'most', 'release'] },
      io: { maxConcurrency: 2, methods: ['fetch'] },
      compute: { maxConcurrency: 1, methods: ['crunch'] },
    });

    // compute is busy with c1, and c2 waits behind it.
    const crunches = ['c1', 'c2'].map((tag) => grouped.call('crunch', tag));
    assert.equal(await grouped.call('inside', 'crunch', 1), 1);
    // A call picks its group (Ray: .options(concurrency_group=...)), here over HTTP, in the body:
    // crunch in io runs now instead of waiting behind c1 and c2.
    const http = await call(cluster.url, 'POST', '/api/v1/actors/grouped/crunch', {
      headers: JSON_HEADERS,
      body: JSON.stringify({ args: ['http', false], concurrencyGroup: 'io' }),
    });
    assert.equal(http.status, 200, http.body.toString());
    assert.equal((http.json as { value: unknown }).value, 'http');
    // Three io calls: two run at once, though compute is busy and has a call waiting.
    const fetches = ['f1', 'f2', 'f3'].map((tag) => grouped.call('fetch', tag));
    assert.equal(await grouped.call('inside', 'fetch', 2), 2);
    // The status shows each group's load.
    await waitFor('the groups load in describe()', async () => {
      const actor = (await client.describe()).deployments.find((d) => d.name === 'grouped')!.actors[0]!;
      const groups = actor.stats?.groups;
      return groups?.io?.running === 2 && groups.io.waiting === 1 && groups.compute?.running === 1 && groups.compute.waiting === 1;
    });
    // And `troupe status` says them, from GET /api/v1/cluster.
    const status = formatCluster((await call(cluster.url, 'GET', '/api/v1/cluster')).json as ClusterView);
    assert.match(status, /concurrency groups: default 0\/1, io 2\/2 \+1 waiting, compute 1\/1 \+1 waiting/);
    // And from the SDK: crunch in default runs now, while io is full too.
    assert.equal(await grouped.withOptions({ concurrencyGroup: 'default' }).call('crunch', 'now', false), 'now');

    // f1 leaves; f3, which waited for an io slot, comes in.
    assert.equal(await grouped.call('release', 'f1'), true);
    assert.equal(await grouped.call('inside', 'fetch', 2), 2);
    for (const tag of ['f2', 'f3', 'c1']) assert.equal(await grouped.call('release', tag), true);
    // c2 ran only once c1 was done: compute has one slot.
    assert.equal(await grouped.call('inside', 'crunch', 1), 1);
    assert.equal(await grouped.call('release', 'c2'), true);
    assert.deepEqual(await Promise.all(fetches), ['f1', 'f2', 'f3']);
    assert.deepEqual(await Promise.all(crunches), ['c1', 'c2']);
    // The most at once, counted inside the methods: io's limit, and compute's (crunch 'now' ran while c1 held compute).
    assert.deepEqual(await grouped.call('most'), { crunch: 2, fetch: 2 });
  });

  test("a stream holds one slot of its method's group; the groups of the class and the spec merge", async () => {
    // The spec adds feed to the class's io group (fetch stays there) and sets io's limit to 2.
    const grouped = await client.actor({
      name: 'grouped-stream',
      module: PARITY,
      export: 'Grouped',
      cpus: 0.1,
      concurrencyGroups: { io: { maxConcurrency: 2, methods: ['feed'] } },
    });
    const view = (await client.describe()).deployments.find((d) => d.name === 'grouped-stream')!.actors[0]!;
    assert.deepEqual(view.concurrencyGroups?.io, { maxConcurrency: 2, methods: ['feed', 'fetch'] });
    const stream = grouped.streamWith<number>({ window: 1 }, 'feed');
    const reader = stream[Symbol.asyncIterator]();
    assert.deepEqual(await reader.next(), { value: 0, done: false });
    // The reader has stopped reading: the stream holds one io slot, so one fetch runs and the next waits.
    const fetches = ['f1', 'f2'].map((tag) => grouped.call('fetch', tag));
    assert.equal(await grouped.call('inside', 'fetch', 1), 1);
    await waitFor('f2 waiting in io', async () => {
      const actor = (await client.describe()).deployments.find((d) => d.name === 'grouped-stream')!.actors[0]!;
      return actor.stats?.groups?.io?.running === 2 && actor.stats.groups.io.waiting === 1;
    });
    // compute is free all along.
    assert.equal(await grouped.call('crunch', 'c', false), 'c');
    // Closing the stream frees its slot: f2 comes in.
    await reader.return?.();
    assert.equal(await grouped.call('inside', 'feed', 0), 0);
    assert.equal(await grouped.call('inside', 'fetch', 2), 2);
    for (const tag of ['f1', 'f2']) assert.equal(await grouped.call('release', tag), true);
    assert.deepEqual(await Promise.all(fetches), ['f1', 'f2']);
  });

  test('a call that would wait on itself in its own group fails naming the group; one into another group is answered', async () => {
    const grouped = await client.actor({ name: 'grouped-self', module: PARITY, export: 'Grouped', cpus: 0.1 });
    // callSelf runs in compute (limit 1) and calls crunch, also compute: it could never start.
    const refused = await grouped
      .withOptions({ concurrencyGroup: 'compute' })
      .call<{ code?: string; message?: string }>('callSelf', 'crunch', 'x', false);
    assert.equal(refused.code, 'TROUPE_ERR_DEADLOCK', refused.message);
    assert.match(
      refused.message!,
      /^grouped-self\.crunch\(\) was called by instance (grouped-self#\d+) on itself \(\1 -> \1\) while it runs a call, in concurrency group 'compute', whose maxConcurrency is 1/,
    );
    // From default, the compute slot is free: answered.
    assert.deepEqual(await grouped.call('callSelf', 'crunch', 'y', false), { value: 'y' });
    // And into io, whose limit is above 1, from an io call.
    assert.deepEqual(await grouped.withOptions({ concurrencyGroup: 'io' }).call('callSelf', 'fetch', 'z', false), { value: 'z' });
  });

  test("through another actor (A -> B -> A) the chain carries each call's group: a cycle into the same group of 1 fails, into another is answered", async () => {
    const a = await client.actor({
      name: 'hop-ga',
      module: PARITY,
      export: 'Hop',
      cpus: 0.1,
      maxConcurrency: 2,
      concurrencyGroups: { relay: { maxConcurrency: 1, methods: ['forward'] } },
    });
    await client.actor({ name: 'hop-gb', module: PARITY, export: 'Hop', cpus: 0.1 });
    // a runs forward in relay and waits on b, whose call back to a's forward needs relay's one slot.
    const answer = await a.withOptions({ timeoutMs: 30_000 }).call('forward', ['hop-gb', 'hop-ga']);
    const nested = (answer as { via: { code?: string; message?: string } }).via;
    assert.equal(nested.code, 'TROUPE_ERR_DEADLOCK', nested.message);
    assert.match(
      nested.message!,
      /^hop-ga\.forward\(\) would wait on itself through a cycle \((hop-ga#\d+) -> hop-gb#\d+ -> \1\): instance \1 runs the call that waits on this one, in concurrency group 'relay', whose maxConcurrency is 1/,
    );
    // The same path with a's first call in default: relay is free for the call that comes back.
    assert.deepEqual(await a.withOptions({ timeoutMs: 30_000, concurrencyGroup: 'default' }).call('forward', ['hop-gb', 'hop-ga']), {
      via: { via: 'end' },
    });
  });

  test('refused: bad names and limits, a method in two groups, "default", a group naming no method, groups on a model, an unknown group per call', async () => {
    const spec = (concurrencyGroups: unknown) =>
      ({ name: 'bad-groups', module: PARITY, export: 'Grouped', cpus: 0.1, concurrencyGroups }) as Parameters<Cluster['actor']>[0];
    await rejectsWith(
      client.actor(spec({ 'two words': { maxConcurrency: 1 } })),
      'TROUPE_ERR_BAD_SPEC',
      /'two words': a concurrency group name/,
    );
    await rejectsWith(client.actor(spec({ io: { maxConcurrency: 0 } })), 'TROUPE_ERR_BAD_SPEC', /concurrencyGroups\.io\.maxConcurrency/);
    await rejectsWith(
      client.actor(spec({ io: { maxConcurrency: 2, methods: ['fetch'] }, compute: { maxConcurrency: 1, methods: ['fetch'] } })),
      'TROUPE_ERR_BAD_SPEC',
      /method 'fetch' is in two concurrency groups \('io' and 'compute'\)/,
    );
    await rejectsWith(
      client.actor(spec({ default: { maxConcurrency: 2 } })),
      'TROUPE_ERR_BAD_SPEC',
      /'default' is the group of the methods no group names/,
    );
    await rejectsWith(client.actor(spec({ io: { maxConcurrency: 2, extra: 1 } })), 'TROUPE_ERR_BAD_SPEC', /extra/);
    // Known only once the class is loaded: the deploy is refused, and nothing stays.
    await rejectsWith(
      client.actor(spec({ io: { maxConcurrency: 2, methods: ['fetch', 'nope'] } })),
      'TROUPE_ERR_BAD_SPEC',
      /the spec's concurrencyGroups\.io names no method of class 'Grouped': nope \(its methods: callSelf, crunch, feed, fetch, inside, most, release\)/,
    );
    assert.equal(
      (await client.describe()).deployments.find((d) => d.name === 'bad-groups'),
      undefined,
    );
    await rejectsWith(
      client.actor({ name: 'bad-class', module: PARITY, export: 'BadGroups', cpus: 0.1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /BadGroups\.concurrencyGroups is malformed: io\.maxConcurrency/,
    );
    await rejectsWith(
      client.deploy({ name: 'bad-model', model: 'mlp.onnx', concurrencyGroups: { io: { maxConcurrency: 2 } } } as ModelDeploymentInput),
      'TROUPE_ERR_BAD_SPEC',
      /only a class actor .* takes concurrencyGroups/,
    );
    // Over HTTP, as a deployment.
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/bad-http', {
      headers: JSON_HEADERS,
      body: JSON.stringify({
        kind: 'class',
        model: `${PARITY}#Grouped`,
        cpus: 0.1,
        concurrencyGroups: { io: { maxConcurrency: 2, methods: ['fetch'] }, x: { maxConcurrency: 1, methods: ['fetch'] } },
      }),
    });
    assertError(put, 400, 'TROUPE_ERR_BAD_SPEC', /method 'fetch' is in two concurrency groups/);

    // A call naming a group the actor lacks, from the SDK and over HTTP.
    const grouped = await client.actor({ name: 'grouped-calls', module: PARITY, export: 'Grouped', cpus: 0.1 });
    await rejectsWith(
      grouped.withOptions({ concurrencyGroup: 'gpu' }).call('fetch', 'a', false),
      'TROUPE_ERR_BAD_REQUEST',
      /grouped-calls\.fetch\(\) names concurrency group 'gpu', which the actor does not have \(its groups: default, io, compute\)/,
    );
    const http = await call(cluster.url, 'POST', '/api/v1/actors/grouped-calls/fetch', {
      headers: JSON_HEADERS,
      body: JSON.stringify({ args: ['a', false], concurrencyGroup: 'gpu' }),
    });
    assertError(http, 400, 'TROUPE_ERR_BAD_REQUEST', /names concurrency group 'gpu'/);
    const badName = await call(cluster.url, 'POST', '/api/v1/actors/grouped-calls/fetch', {
      headers: JSON_HEADERS,
      body: JSON.stringify({ args: ['a', false], concurrencyGroup: '../x' }),
    });
    assertError(badName, 400, 'TROUPE_ERR_BAD_REQUEST', /concurrencyGroup/);
    // An actor without named groups has only default.
    const plain = await client.actor({ name: 'plain', module: PARITY, export: 'SelfCaller', cpus: 0.1 });
    assert.equal(await plain.withOptions({ concurrencyGroup: 'default' }).call('ping'), 'pong');
    await rejectsWith(plain.withOptions({ concurrencyGroup: 'io' }).call('ping'), 'TROUPE_ERR_BAD_REQUEST', /its groups: default\)/);
  });
});
