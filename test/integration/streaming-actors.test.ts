import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import { Prng, RawSocket, fuzzFrame } from '../helpers/fuzz.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';

const CLASSES = 'test/fixtures/classes.js';

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe('streaming calls: async generator methods read with for await', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let ticker: ActorHandle;
  let notes: ActorHandle;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
    ticker = await client.actor({ name: 'ticker', module: CLASSES, export: 'Ticker', cpus: 0.1 });
    notes = await client.actor({ name: 'notes', module: CLASSES, export: 'Notebook', cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('items arrive in order, each once, from async and sync generators', async () => {
    assert.deepEqual(
      await collect(ticker.stream<number>('count', 100)),
      Array.from({ length: 100 }, (_, i) => i),
    );
    assert.deepEqual(await collect(ticker.streamWith<number>({ window: 1 }, 'doubles', 5)), [0, 2, 4, 6, 8]);
    assert.deepEqual(await collect(ticker.stream('count', 0)), []);
  });

  test('a slow reader holds the producer back: it never runs more than the window ahead', async () => {
    const window = 4;
    const before = await ticker.call<{ produced: number }>('stats');
    let read = 0;
    for await (const item of ticker.streamWith<{ i: number }>({ window }, 'forever')) {
      assert.equal(item.i, read++);
      // A slow reader: a round trip to another actor per item. Unpaced, this endless generator
      // would make thousands of items meanwhile.
      await notes.call('pid');
      if (read === 40) break;
    }
    const made = (await ticker.call<{ produced: number }>('stats')).produced - before.produced;
    assert.ok(made >= 40 && made <= 40 + window, `the generator made ${made} items for 40 read with a window of ${window}`);
  });

  test('leaving the loop cancels the stream: the generator stops and its finally runs', async () => {
    const before = await ticker.call<{ produced: number; closed: number }>('stats');
    for await (const item of ticker.streamWith<{ i: number }>({ window: 8 }, 'forever')) if (item.i === 9) break;
    // The instance is free again (calls run in order), and the generator was closed exactly once.
    const after = await ticker.call<{ produced: number; closed: number }>('stats');
    assert.equal(after.closed, before.closed + 1);
    assert.ok(after.produced - before.produced <= 10 + 8, `produced ${after.produced - before.produced} items for 10 read`);
  });

  test('a stream that fails midway throws after the items it gave, saying after which', async () => {
    const got: number[] = [];
    await rejectsWith(
      (async () => {
        for await (const item of ticker.stream<number>('failAfter', 3)) got.push(item);
      })(),
      'TROUPE_ERR_METHOD_FAILED',
      /Ticker.failAfter\(\) threw after 3 items: the source broke \(after item 2 of the stream; no later item was sent\)/,
    );
    assert.deepEqual(got, [0, 1, 2]);
    await rejectsWith(collect(ticker.stream('plain')), 'TROUPE_ERR_METHOD_FAILED', /Ticker.plain\(\) returned no stream/);
    await rejectsWith(ticker.call('count', 3), 'TROUPE_ERR_METHOD_FAILED', /Ticker.count\(\) returns a stream: read it with handle.stream/);
  });

  test('an instance that dies mid-stream fails it with a retryable code; no item is repeated', async () => {
    const got: number[] = [];
    let failure: unknown;
    try {
      for await (const item of ticker.stream<number>('crashAfter', 5)) got.push(item);
    } catch (err) {
      failure = err;
    }
    assert.ok(failure instanceof TroupeError, String(failure));
    assert.equal(failure.code, 'TROUPE_ERR_ACTOR_DIED');
    assert.equal(failure.retryable, true);
    assert.deepEqual(
      got,
      Array.from({ length: got.length }, (_, i) => i),
    );
    if (got.length > 0) assert.match(failure.message, new RegExp(`after item ${got.length - 1} of the stream`));
    // Ticker keeps no checkpoint: the restarted instance starts from its constructor, and the next
    // call (a stream too) says once that what this client saw it hold is gone.
    await waitFor('ticker READY again', async () =>
      (await client.describe()).deployments.find((d) => d.name === 'ticker')?.actors.every((a) => a.state === 'READY'),
    );
    await rejectsWith(collect(ticker.stream('count', 2)), 'TROUPE_ERR_STATE_LOST', /instance ticker#0 restarted \(exited with code 9\)/);
    assert.deepEqual(await collect(ticker.stream<number>('count', 2)), [0, 1]);
  });

  test('fuzzed call and stream frames never take the head or an instance down, and every answer is proper', async () => {
    const r = new Prng(Number(process.env.TROUPE_TEST_FUZZ_SEED ?? 23));
    const pidsOf = async () =>
      (await client.describe()).deployments.flatMap((d) => d.actors.map((a) => [a.name, a.state, a.pid] as const)).sort();
    // The crash test's instance may still be restarting: start from every instance READY.
    const before = await waitFor('every instance READY', async () => {
      const now = await pidsOf();
      return now.every(([, state]) => state === 'READY') && now;
    });
    const templates = [
      { type: 'invoke', id: 'i1', actor: 'ticker', method: 'plain', args: [] },
      { type: 'invoke', id: 'i2', actor: 'notes', method: 'write', args: ['x'], sessionKey: 's' },
      { type: 'invoke', id: 'i3', actor: 'ticker', method: 'plain', args: [null], refs: { '0': { call: 'i1' } } },
      { type: 'stream', id: 's1', actor: 'ticker', method: 'count', args: [3], credit: 2 },
      { type: 'streamCredit', id: 's2', stream: 's1', n: 1 },
      { type: 'streamCancel', id: 's3', stream: 's1' },
    ];
    const url = cluster.url.replace(/^http/, 'ws');
    let socket: RawSocket | undefined;
    const problems: string[] = [];
    for (let i = 0; i < 600; i++) {
      if (!socket?.open) {
        if (socket) await Promise.race([socket.closed, new Promise((resolve) => setTimeout(resolve, 5000))]);
        socket = new RawSocket(`${url}/v1/client`, {}, ['reply', 'streamItem']);
        await socket.opened;
      }
      const frame = fuzzFrame(r, templates);
      socket.send(frame.data, frame.binary);
      if (i % 25 === 24) await socket.probe(`probe-${i}`);
      problems.push(...socket.problems.splice(0));
    }
    await socket?.probe('probe-end');
    problems.push(...(socket?.problems.splice(0) ?? []));
    // Leaving cancels whatever stream the fuzzer opened and never read, which frees the instance.
    socket?.close();
    assert.deepEqual(problems, []);
    assert.ok(isAlive(cluster.head.process.pid!));
    assert.deepEqual(await collect(ticker.stream<number>('count', 3)), [0, 1, 2]);
    assert.deepEqual(await pidsOf(), before);
  });
});
