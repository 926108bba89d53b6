import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ERROR_CODES, connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { Prng, randomJson, randomValue } from '../helpers/fuzz.js';
import { GRAPH_AGENT } from '../helpers/graphs.js';
import { assertError, call } from '../helpers/http.js';

const CLASSES = 'test/fixtures/classes.js';
const TOKEN = 'actors-http-token-5c1d';
const HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };

describe('HTTP: POST /api/v1/actors/{name}/{method}', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const post = (path: string, body?: unknown, headers: Record<string, string> = HEADERS) =>
    call(cluster.url, 'POST', `/api/v1/actors/${path}`, { headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });

  before(async () => {
    cluster = await startCluster({ headArgs: ['--token', TOKEN], agents: [[...GRAPH_AGENT, '--token', TOKEN]] });
    client = await connect(cluster.url, { token: TOKEN });
    await client.actor({ name: 'counter', module: CLASSES, export: 'Counter', args: [1], cpus: 0.1 });
    await client.actor({ name: 'notes', module: CLASSES, export: 'Notebook', replicas: 2, cpus: 0.1 });
    await client.actor({ name: 'ticker', module: CLASSES, export: 'Ticker', cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test("calls a method with JSON arguments and answers with its value, on the same instance state as the SDK's calls", async () => {
    const added = await post('counter/add', { args: [41] });
    assert.equal(added.status, 200, added.body.toString());
    const { id, value } = added.json as { id: string; value: unknown };
    assert.equal(value, 42);
    assert.ok(id.length > 0);
    assert.equal(await client.actorHandle('counter').call('total'), 42);
    // No body: no arguments.
    const total = await post('counter/total');
    assert.equal(total.status, 200);
    assert.equal((total.json as { value: unknown }).value, 42);
  });

  test('the call needs the cluster token, as every write endpoint does', async () => {
    assertError(
      await post('counter/total', {}, { 'content-type': 'application/json' }),
      401,
      'TROUPE_ERR_UNAUTHORIZED',
      /missing cluster token/,
    );
  });

  test('sessionKey sticks to one instance, and refs feed an earlier call in on the head', async () => {
    const pids = new Set<unknown>();
    for (let i = 0; i < 3; i++) pids.add(((await post('notes/pid', { sessionKey: 'carol' })).json as { value: unknown }).value);
    assert.equal(pids.size, 1);
    const first = (await post('counter/add', { args: [0] })).json as { id: string; value: number };
    const fed = await post('counter/add', { args: [null], refs: { '0': { call: first.id } } });
    assert.equal((fed.json as { value: number }).value, 2 * first.value);
    assertError(
      await post('counter/add', { refs: { '0': { call: 'never-made' } } }),
      404,
      'TROUPE_ERR_UNKNOWN_CALL',
      /is call never-made, which is unknown/,
    );
  });

  test('bad bodies, names and methods are refused with a code and a message that names the problem', async () => {
    const bad = await call(cluster.url, 'POST', '/api/v1/actors/counter/add', { headers: HEADERS, body: '{"args": [1' });
    assertError(bad, 400, 'TROUPE_ERR_BAD_REQUEST', /the call body/);
    assertError(await post('counter/add', { args: 5 }), 400, 'TROUPE_ERR_BAD_REQUEST', /the call body is invalid at 'args'/);
    assertError(await post('counter/add', { args: [], extra: 1 }), 400, 'TROUPE_ERR_BAD_REQUEST', /the call body is invalid/);
    assertError(await post('counter/_private'), 400, 'TROUPE_ERR_BAD_REQUEST', /method '_private': a method name is/);
    assertError(await post('ghost/add'), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /no actor named 'ghost'/);
    assertError(await post('counter/nothing'), 404, 'TROUPE_ERR_UNKNOWN_METHOD', /class 'Counter' has no method 'nothing'/);
    assertError(await post('counter/fail', { args: ['oops'] }), 500, 'TROUPE_ERR_METHOD_FAILED', /Counter.fail\(\) threw: oops/);
  });

  test('fuzzed calls never take the head or the instance down, and every answer is a value or a coded error', async () => {
    const r = new Prng(23);
    const headPid = cluster.head.process.pid!;
    const instancePid = await client.actorHandle('notes').session('fuzz').call<number>('pid');
    const methods = ['write', 'read', 'pid', 'add', 'total', 'nothing', '__proto__', 'constructor', 'x'.repeat(200), '%00', 'ü'];
    for (let i = 0; i < 200; i++) {
      const actor = r.pick(['counter', 'notes', 'ghost', '..', 'a'.repeat(80)]);
      const method = r.pick(methods);
      const body =
        r.next() < 0.3
          ? randomJson(r)
          : JSON.stringify(
              { args: Array.from({ length: r.int(4) }, () => randomValue(r, 2)), ...(r.next() < 0.3 ? { sessionKey: 'fuzz' } : {}) },
              (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v),
            );
      const answer = await call(cluster.url, 'POST', `/api/v1/actors/${encodeURIComponent(actor)}/${encodeURIComponent(method)}`, {
        headers: HEADERS,
        body,
      });
      const json = answer.json as { value?: unknown; code?: string } | undefined;
      assert.ok(json !== undefined, `a JSON answer (${answer.status})`);
      if (answer.status === 200) assert.ok('value' in json);
      else assert.ok(ERROR_CODES.includes(json.code as never), `${answer.status} ${answer.body.toString().slice(0, 200)}`);
    }
    assert.ok(isAlive(headPid));
    assert.equal(await client.actorHandle('notes').session('fuzz').call('pid'), instancePid);
  });

  test('POST …/{method}/stream sends the items of an async generator as server-sent events, then the end or the error', async () => {
    const events = (text: string) =>
      text
        .trim()
        .split('\n\n')
        .map((e) => Object.fromEntries(e.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)])));
    const ok = await post('ticker/count/stream', { args: [5] });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('content-type'), 'text/event-stream');
    assert.deepEqual(events(ok.body.toString()), [
      ...[0, 1, 2, 3, 4].map((i) => ({ id: String(i), data: String(i) })),
      { event: 'end', data: '{"items":5}' },
    ]);
    const broken = events((await post('ticker/failAfter/stream', { args: [2] })).body.toString());
    assert.deepEqual(broken.slice(0, 2), [
      { id: '0', data: '0' },
      { id: '1', data: '1' },
    ]);
    assert.equal(broken[2]!.event, 'error');
    assert.equal(JSON.parse(broken[2]!.data!).code, 'TROUPE_ERR_METHOD_FAILED');
    assertError(await post('ghost/count/stream', { args: [1] }), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /no actor named 'ghost'/);
  });

  test('an HTTP client that goes away mid-stream stops the generator', async () => {
    const before = await client.actorHandle('ticker').call<{ closed: number }>('stats');
    const abort = new AbortController();
    const response = await fetch(`${cluster.url}/api/v1/actors/ticker/forever/stream`, {
      method: 'POST',
      headers: HEADERS,
      body: '{}',
      signal: abort.signal,
    });
    const reader = response.body!.getReader();
    let text = '';
    while (!text.includes('id: 20\n')) text += Buffer.from((await reader.read()).value!).toString();
    abort.abort();
    // The instance is free once the generator stopped (calls run in order), and its finally ran once.
    const after = await waitFor('the generator stopped', async () => {
      const stats = await client
        .actorHandle('ticker')
        .withOptions({ timeoutMs: 2000 })
        .call<{ closed: number }>('stats')
        .catch(() => undefined);
      return stats && stats.closed > before.closed && stats;
    });
    assert.equal(after.closed, before.closed + 1);
  });
});
