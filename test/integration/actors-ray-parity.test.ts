import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, tensor, wait } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';

/**
 * What a Ray user moving to Troupe reaches for first, written as they would write it
 * (docs/actors.md, "Coming from Ray"): each test names the Ray idiom it stands for.
 */
const PARITY = 'test/fixtures/ray-parity.js';

/** The lines a Cancellable wrote to `file` so far (read while a call holds its instance). */
async function linesOf(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean);
}

/** Each tag's start and end index in `events`. */
function spans(events: string[], tags: string[]): { tag: string; start: number; end: number }[] {
  return tags.map((tag) => ({ tag, start: events.indexOf(`start ${tag}`), end: events.indexOf(`end ${tag}`) }));
}

describe('class actors as a Ray user writes them', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-parity-'));
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('maxConcurrency 5 (Ray: @ray.remote(max_concurrency=5) on an async actor): five slow calls run at once', async () => {
    const sleeper = await client.actor({ name: 'sleeper5', module: PARITY, export: 'Sleeper', cpus: 0.1, maxConcurrency: 5 });
    const tags = ['a', 'b', 'c', 'd', 'e'];
    // Each call waits for all five to have started: they can only finish if the instance runs them together.
    assert.deepEqual(await Promise.all(tags.map((tag) => sleeper.call('slow', 200, tag, 5))), tags);
    const events = await sleeper.call<string[]>('events');
    const firstEnd = events.findIndex((e) => e.startsWith('end '));
    assert.deepEqual(
      events.slice(0, 5),
      tags.map((t) => `start ${t}`),
      `calls start in the order they were made: ${events.join(', ')}`,
    );
    assert.equal(firstEnd, 5, `all five started before any ended: ${events.join(', ')}`);
    assert.equal(await sleeper.call('mostAtOnce'), 5);

    // A sixth call waits for a slot: never more than five at once.
    const six = ['f', 'g', 'h', 'i', 'j', 'k'];
    await Promise.all(six.map((tag) => sleeper.call('slow', 50, tag, 10)));
    assert.equal(await sleeper.call('mostAtOnce'), 5);
    const later = (await sleeper.call<string[]>('events')).slice(10);
    const k = spans(later, six).find((s) => s.tag === 'k')!;
    assert.ok(
      later.slice(0, k.start).some((e) => e.startsWith('end ')),
      `the sixth call started only after one of the five ended: ${later.join(', ')}`,
    );
  });

  test('maxConcurrency 1 (the default, as a Ray actor without it): calls never overlap, in the order made', async () => {
    const sleeper = await client.actor({ name: 'sleeper1', module: PARITY, export: 'Sleeper', cpus: 0.1, maxConcurrency: 1 });
    const tags = ['a', 'b', 'c', 'd', 'e'];
    assert.deepEqual(await Promise.all(tags.map((tag) => sleeper.call('slow', 200, tag))), tags);
    const events = await sleeper.call<string[]>('events');
    assert.deepEqual(
      events,
      tags.flatMap((t) => [`start ${t}`, `end ${t}`]),
    );
    assert.equal(await sleeper.call('mostAtOnce'), 1);
  });

  test('a stream holds one slot, not the instance: other calls run while it is open', async () => {
    const sleeper = await client.actor({ name: 'sleeper2', module: PARITY, export: 'Sleeper', cpus: 0.1, maxConcurrency: 2 });
    const stream = sleeper.streamWith<number>({ window: 1 }, 'ticks');
    const reader = stream[Symbol.asyncIterator]();
    assert.deepEqual(await reader.next(), { value: 0, done: false });
    // The reader has stopped reading; calls still get the other slot.
    assert.equal(await sleeper.call('slow', 1, 'during'), 'during');
    assert.deepEqual(await sleeper.call('events'), ['stream open', 'start during', 'end during']);
    await reader.return?.();
  });

  test('wait(futures, { numReturns, timeoutMs }) (Ray: ray.wait) over calls and runs, and status() without awaiting', async () => {
    const sleeper = await client.actor({ name: 'waiter', module: PARITY, export: 'Sleeper', cpus: 0.1, maxConcurrency: 4 });
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', cpus: 0.1, threads: 1 });
    const held = sleeper.call<string>('hold', 'x');
    const quick = sleeper.call<string>('slow', 0, 'quick');
    const failing = sleeper.call('nothing');
    const run = client.run('mlp', { x: tensor('float32', [1, 64], new Float32Array(64)) });
    // Ray's default: the first one ready.
    const first = await wait([held, quick]);
    assert.deepEqual([first.ready, first.pending], [[quick], [held]]);
    assert.equal(quick.status(), 'fulfilled');
    assert.equal(held.status(), 'pending');
    // A failed call is ready too; a run's Future mixes with calls'.
    const three = await wait([held, failing, run], { numReturns: 2 });
    assert.deepEqual([three.ready, three.pending], [[failing, run], [held]]);
    assert.equal(failing.status(), 'rejected');
    await rejectsWith(failing, 'TROUPE_ERR_UNKNOWN_METHOD', /has no method 'nothing'/);
    assert.deepEqual(Object.keys(await run), ['logits']);
    // The held call cannot settle until released: a timeout answers with it pending, and cancels nothing.
    assert.deepEqual(await wait([held], { timeoutMs: 20 }), { ready: [], pending: [held] });
    assert.equal(await sleeper.call('release', 'x'), true);
    assert.deepEqual(await wait([held, quick], { numReturns: 2 }), { ready: [held, quick], pending: [] });
    assert.equal(await held, 'x');
  });

  test('an actor calling itself with maxConcurrency 1 fails at once naming the cycle; with 2 it is answered', async () => {
    const alone = await client.actor({ name: 'selfish', module: PARITY, export: 'SelfCaller', cpus: 0.1 });
    const refused = await alone.call<{ code?: string; message?: string }>('callSelf');
    assert.equal(refused.code, 'TROUPE_ERR_DEADLOCK', refused.message);
    assert.match(
      refused.message!,
      /^selfish\.ping\(\) was called by instance (selfish#\d+) on itself \(\1 -> \1\) while it runs a call, with maxConcurrency 1/,
    );
    // The instance is unharmed, and a client outside it is not taken for it.
    assert.equal(await alone.call('ping'), 'pong');
    const roomy = await client.actor({ name: 'selfish2', module: PARITY, export: 'SelfCaller', cpus: 0.1, maxConcurrency: 2 });
    assert.deepEqual(await roomy.call('callSelf'), { value: 'pong' });
  });

  test('future.cancel() (Ray: ray.cancel): a queued call never runs, a running one sees its signal abort; both fail CANCELLED', async () => {
    const file = join(dir, 'cancel1.log');
    const actor = await client.actor({ name: 'cancel1', module: PARITY, export: 'Cancellable', args: [file], cpus: 0.1 });
    const running = actor.call<string>('hang', 'a');
    await waitFor('hang(a) to start', async () => (await linesOf(file)).includes('start a'));
    // Queued behind it (maxConcurrency 1): cancelled, it never runs.
    const queued = actor.call('record', 'q');
    queued.cancel();
    await rejectsWith(queued, 'TROUPE_ERR_CANCELLED', /^cancel1\.record\(\) was cancelled by its caller before it ran/);
    running.cancel();
    await rejectsWith(running, 'TROUPE_ERR_CANCELLED', /^cancel1\.hang\(\) was cancelled by its caller while instance cancel1#\d+ ran it/);
    // The method saw its signal abort and stopped; the instance takes the next call, and the cancelled one never ran.
    assert.equal(await actor.call('record', 'after'), 'after');
    assert.deepEqual(await actor.call('log'), ['start a', 'stopped a (aborted)', 'ran after']);
    // A call already answered is left as it is.
    const done = actor.call('record', 'done');
    assert.equal(await done, 'done');
    done.cancel();
    assert.equal(done.status(), 'fulfilled');
  });

  test('a signal in the call options cancels; with maxConcurrency 2 each call has its own signal', async () => {
    const file = join(dir, 'cancel2.log');
    const actor = await client.actor({
      name: 'cancel2',
      module: PARITY,
      export: 'Cancellable',
      args: [file],
      cpus: 0.1,
      maxConcurrency: 2,
    });
    const x = new AbortController();
    const first = actor.withOptions({ signal: x.signal }).call('hang', 'x');
    const second = actor.call<string>('hang', 'y');
    await waitFor('both to start', async () => {
      const lines = await linesOf(file);
      return lines.includes('start x') && lines.includes('start y');
    });
    x.abort();
    await rejectsWith(first, 'TROUPE_ERR_CANCELLED', /hang\(\) was cancelled by its caller while instance/);
    await waitFor('x to stop', async () => (await linesOf(file)).includes('stopped x (aborted)'));
    assert.equal(second.status(), 'pending', 'the other call runs on: its signal did not abort');
    second.cancel();
    await rejectsWith(second, 'TROUPE_ERR_CANCELLED', /hang\(\) was cancelled/);
    await waitFor('y to stop', async () => (await linesOf(file)).includes('stopped y (aborted)'));
    // Aborted before the call: nothing is sent.
    await rejectsWith(
      actor.withOptions({ signal: AbortSignal.abort() }).call('record', 'never'),
      'TROUPE_ERR_CANCELLED',
      /record\(\) was cancelled by its caller: its signal was aborted before it was sent/,
    );
    assert.deepEqual(await actor.call('log'), ['start x', 'start y', 'stopped x (aborted)', 'stopped y (aborted)']);
  });

  test('a signal in the options of a stream ends it as leaving the loop does, and the loop throws CANCELLED', async () => {
    const sleeper = await client.actor({ name: 'sleeper-sig', module: PARITY, export: 'Sleeper', cpus: 0.1 });
    const stop = new AbortController();
    const seen: number[] = [];
    await rejectsWith(
      (async () => {
        for await (const i of sleeper.withOptions({ signal: stop.signal }).streamWith<number>({ window: 2 }, 'ticks')) {
          seen.push(i);
          if (i === 3) stop.abort();
        }
      })(),
      'TROUPE_ERR_CANCELLED',
      /ticks\(\) was cancelled by its caller: its signal was aborted while it streamed/,
    );
    assert.deepEqual(seen, [0, 1, 2, 3]);
    // The generator ended (its finally ran) and the instance takes the next call.
    assert.deepEqual(await sleeper.call('events'), ['stream open', 'stream closed']);
  });

  test('over HTTP, closing the request cancels the call (the method sees its signal abort)', async () => {
    const file = join(dir, 'cancel3.log');
    const actor = await client.actor({ name: 'cancel3', module: PARITY, export: 'Cancellable', args: [file], cpus: 0.1 });
    const url = new URL(cluster.url);
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: '/api/v1/actors/cancel3/hang',
      agent: false,
      headers: { 'content-type': 'application/json' },
    });
    const closed = new Promise<void>((resolve) => req.on('error', () => resolve()).on('close', () => resolve()));
    req.end(JSON.stringify({ args: ['h'] }));
    await waitFor('hang(h) to start', async () => (await linesOf(file)).includes('start h'));
    req.destroy();
    await closed;
    await waitFor('hang(h) to stop', async () => (await linesOf(file)).includes('stopped h (aborted)'));
    assert.equal(await actor.call('record', 'next'), 'next');
  });

  test('maxRestarts 0 (Ray: max_restarts=0): the first crash leaves the instance DEAD, and calls fail ACTOR_DEAD naming the cause', async () => {
    const fragile = await client.actor({ name: 'fragile0', module: PARITY, export: 'Fragile', cpus: 0.1, maxRestarts: 0 });
    assert.equal(await fragile.call('count'), 1);
    // The call that was running when it died: not retryable, and it says why.
    await rejectsWith(
      fragile.call('boom', 'kaput'),
      'TROUPE_ERR_ACTOR_DEAD',
      /^fragile0\.boom\(\): instance fragile0#\d+ died running it and is DEAD: exited with code \d+.*kaput.*not restarted \(maxRestarts 0\)/s,
    );
    const later = fragile.call('count');
    await rejectsWith(later, 'TROUPE_ERR_ACTOR_DEAD', /fragile0#\d+ DEAD: .*kaput.*not restarted \(maxRestarts 0\)/s);
    await later.then(undefined, (err: unknown) => assert.equal((err as { retryable?: boolean }).retryable, false));
  });

  test('maxRestarts 1: one restart, then DEAD at the second crash', async () => {
    const fragile = await client.actor({ name: 'fragile1', module: PARITY, export: 'Fragile', cpus: 0.1, maxRestarts: 1 });
    // It will come back: the running call fails with the retryable ACTOR_DIED, and the next one waits for the restart.
    await rejectsWith(fragile.call('boom', 'first'), 'TROUPE_ERR_ACTOR_DIED', /exited|lost its connection/);
    assert.equal(await fragile.withOptions({ timeoutMs: 60_000 }).call('count'), 1, 'a fresh process (no checkpoint)');
    await rejectsWith(fragile.call('boom', 'second'), 'TROUPE_ERR_ACTOR_DEAD', /second.*gave up after 1 restarts \(maxRestarts 1\)/s);
  });

  test('maxTaskRetries with retryable methods (Ray: max_task_retries): a retryable call runs again after a restart; others do not', async () => {
    const fragile = await client.actor({
      name: 'fragile2',
      module: PARITY,
      export: 'Fragile',
      cpus: 0.1,
      maxRestarts: -1,
      maxTaskRetries: 1,
      retryable: ['flaky'],
    });
    // The first run crashes the instance; the head sends the call again once it is back, and it answers.
    assert.equal(await fragile.withOptions({ timeoutMs: 60_000 }).call('flaky', join(dir, 'flaky-once')), 'ok');
    // boom is not named retryable: it is not sent again.
    await rejectsWith(fragile.call('boom', 'not retried'), 'TROUPE_ERR_ACTOR_DIED', /exited|lost its connection/);
    await rejectsWith(
      client.actor({ name: 'bad', module: PARITY, export: 'Fragile', maxTaskRetries: 2 }),
      'TROUPE_ERR_BAD_SPEC',
      /maxTaskRetries retries only the methods named in retryable/,
    );
    await rejectsWith(client.deploy({ name: 'bad', model: 'mlp.onnx', retryable: ['x'] }), 'TROUPE_ERR_BAD_SPEC', /only a class actor/);
  });

  test('a cycle A -> B -> A the head can see fails at once naming it, and the deadline travels with nested calls', async () => {
    const a = await client.actor({ name: 'hop-a', module: PARITY, export: 'Hop', cpus: 0.1 });
    await client.actor({ name: 'hop-b', module: PARITY, export: 'Hop', cpus: 0.1 });
    // A chain without a cycle is answered, each hop through the instance's own client (this.context.cluster()).
    assert.deepEqual(await a.call('forward', ['hop-b']), { via: 'end' });
    // a -> b -> a: a runs the call that waits on b, with maxConcurrency 1, so b's call to a could never start.
    const answer = await a.withOptions({ timeoutMs: 30_000 }).call('forward', ['hop-b', 'hop-a']);
    const nested = (answer as { via: { code?: string; message?: string } }).via;
    assert.equal(nested.code, 'TROUPE_ERR_DEADLOCK', nested.message);
    assert.match(nested.message!, /^hop-a\.forward\(\) would wait on itself through a cycle \((hop-a#\d+) -> hop-b#\d+ -> \1\)/);
    // The deadline: a call made inside a method is bounded by the time its caller has left.
    const { mine, nested: left } = await a.withOptions({ timeoutMs: 20_000 }).call<{ mine: number; nested: number }>('budgets', 'hop-b');
    assert.ok(mine <= 20_000, `the method's own budget ${mine} ms is its caller's at most`);
    assert.ok(left <= mine, `the nested call's budget ${left} ms is at most the outer call's ${mine} ms`);
    assert.equal(await client.actorHandle('hop-b').call('left'), null, 'a call without a deadline has none');
  });

  test('an ActorHandle passed as an argument (Ray: passing a handle to an actor) arrives usable in the callee', async () => {
    const a = await client.actor({ name: 'hop-h', module: PARITY, export: 'Hop', cpus: 0.1 });
    const counter = await client.actor({ name: 'fragile-h', module: PARITY, export: 'Fragile', cpus: 0.1 });
    assert.equal(await counter.call('count'), 1);
    // Inside hop-h the handle calls fragile-h through hop-h's own client; anywhere in a value too.
    assert.deepEqual(await a.call('through', counter, 'count'), { name: 'fragile-h', value: 2 });
    assert.deepEqual(await a.call('forward', []), 'end');
    assert.equal(await counter.call('count'), 3);
  });

  test('maxConcurrency is for class actors, and a whole number from 1', async () => {
    await rejectsWith(
      client.actor({ name: 'bad', module: PARITY, export: 'Sleeper', maxConcurrency: 0 }),
      'TROUPE_ERR_BAD_SPEC',
      /maxConcurrency/,
    );
    await rejectsWith(
      client.deploy({ name: 'bad', model: 'mlp.onnx', maxConcurrency: 4 }),
      'TROUPE_ERR_BAD_SPEC',
      /only a class actor .* takes maxConcurrency/,
    );
  });
});
