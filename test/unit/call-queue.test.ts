import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CallQueue, MAX_QUEUE_WAIT_MS, replicaCallLimit } from '../../runtime/dispatch/call-queue.js';
import type { QueueTarget, Replica } from '../../runtime/dispatch/call-queue.js';
import { TroupeError } from '../../runtime/errors.js';
import type { CallReply } from '../../runtime/protocol/actor.js';
import { tensor } from '../../runtime/tensor/tensor.js';
import { fromWire, toWire } from '../../runtime/tensor/wire.js';
import type { WireTensorMap } from '../../runtime/tensor/wire.js';

// The queue is ours and real; only the replicas at its edge are fakes: each holds the calls it
// was sent until the test answers or fails them, so a test decides who is busy and when room opens.

interface Held {
  label: number;
  timeoutMs: number | undefined;
  answer: () => void;
  fail: (error: unknown) => void;
}

class FakeReplica implements Replica {
  inFlight = 0;
  readonly held: Held[] = [];
  /** Labels of every call this replica was sent, in order. */
  readonly seen: number[] = [];

  constructor(readonly name: string) {}

  call(inputs: WireTensorMap, _outputs: string[] | undefined, timeoutMs: number | undefined): Promise<CallReply> {
    this.inFlight++;
    const label = labelOf(inputs);
    this.seen.push(label);
    return new Promise((resolve, reject) => {
      const settle = () => {
        this.inFlight--;
        this.held.splice(this.held.indexOf(entry), 1);
      };
      const entry: Held = {
        label,
        timeoutMs,
        // The reply echoes the inputs, so a caller can tell it got its own answer.
        answer: () => (settle(), resolve({ outputs: inputs, timing: { queueMs: 0, computeMs: 1, batchRows: 1, batchCalls: 1 } })),
        fail: (error) => (settle(), reject(error)),
      };
      this.held.push(entry);
    });
  }

  /** Answers the oldest call it holds. */
  answerOldest(): number {
    const oldest = this.held[0];
    assert.ok(oldest, `${this.name} holds no call`);
    oldest.answer();
    return oldest.label;
  }

  failOldest(error: unknown): number {
    const oldest = this.held[0];
    assert.ok(oldest, `${this.name} holds no call`);
    oldest.fail(error);
    return oldest.label;
  }
}

/** A one-element input carrying `k`, so replies and replicas show which call they were. */
const input = (k: number): WireTensorMap => ({ x: toWire(tensor('float32', [1], new Float32Array([k]))) });
const labelOf = (m: WireTensorMap) => (fromWire(m.x!, 'x').data as Float32Array)[0]!;

interface Target extends QueueTarget {
  serving: FakeReplica[];
  canServe: boolean;
}

function target(serving: FakeReplica[], limits: Partial<Pick<QueueTarget, 'maxQueue' | 'maxRetries' | 'perReplicaLimit'>> = {}): Target {
  return {
    name: 'mlp',
    maxQueue: limits.maxQueue ?? 100,
    maxRetries: limits.maxRetries ?? 2,
    perReplicaLimit: limits.perReplicaLimit ?? 2,
    serving,
    canServe: true,
    replicas() {
      return this.serving;
    },
    couldServe() {
      return this.canServe;
    },
    describeReplicas() {
      return this.serving.map((r) => `${r.name} READY`).join(', ') || 'no replicas';
    },
  };
}

/** Lets settled replies run their continuations (the queue pumps in a `then`). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/** A rejection, as the code it carries (the queue only ever rejects with TroupeErrors). */
async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof TroupeError, `rejected with ${String(err)}`);
    return err.code;
  }
  assert.fail('the call succeeded');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('CallQueue: fair dispatch', { timeout: 10_000 }, () => {
  test('each call goes to the least loaded replica with room', async () => {
    const [a, b] = [new FakeReplica('a'), new FakeReplica('b')];
    const q = new CallQueue(target([a, b], { perReplicaLimit: 3 }));
    const calls = [1, 2, 3, 4].map((k) => q.submit(input(k)));
    assert.deepEqual(
      [a.seen, b.seen],
      [
        [1, 3],
        [2, 4],
      ],
      'alternating, as each send makes its replica the busier one',
    );
    a.answerOldest();
    a.answerOldest();
    await settle();
    const fifth = q.submit(input(5));
    assert.deepEqual(a.seen, [1, 3, 5], 'the idle replica, not the one still holding two');
    b.answerOldest();
    b.answerOldest();
    a.answerOldest();
    const results = await Promise.all([...calls, fifth]);
    assert.deepEqual(
      results.map((r) => labelOf(r.outputs)),
      [1, 2, 3, 4, 5],
      'each caller got its own reply',
    );
    assert.equal(results[0]!.timing?.computeMs, 1, "the actor's timing is passed on");
  });

  test('waiting calls go out oldest first, each as soon as a replica has room', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a], { perReplicaLimit: 1 }));
    const calls = [1, 2, 3].map((k) => q.submit(input(k)));
    assert.equal(q.queued, 2);
    assert.deepEqual(a.seen, [1]);
    for (const expected of [
      [1, 2],
      [1, 2, 3],
    ]) {
      a.answerOldest();
      await settle();
      assert.deepEqual(a.seen, expected);
    }
    a.answerOldest();
    const results = await Promise.all(calls);
    assert.equal(q.queued, 0);
    assert.equal(results[0]!.headQueueMs, 0, 'a call sent at once did not wait in the head');
    assert.ok(results[2]!.headQueueMs >= 0);
  });

  test('a replica that joins takes the waiting calls when pumped', async () => {
    const [a, b] = [new FakeReplica('a'), new FakeReplica('b')];
    const t = target([a], { perReplicaLimit: 1 });
    const q = new CallQueue(t);
    const calls = [1, 2, 3].map((k) => q.submit(input(k)));
    t.serving.push(b);
    q.pump();
    assert.deepEqual([a.seen, b.seen, q.queued], [[1], [2], 1]);
    a.answerOldest();
    b.answerOldest();
    await settle();
    a.answerOldest();
    await Promise.all(calls);
  });
});

describe('CallQueue: per-replica limits', { timeout: 10_000 }, () => {
  test('a replica holds a running batch and the next full one, never fewer than two calls', () => {
    assert.equal(replicaCallLimit(1), 2);
    assert.equal(replicaCallLimit(8), 16);
  });

  test('no replica is sent more than the limit; the rest wait in the head', async () => {
    const [a, b] = [new FakeReplica('a'), new FakeReplica('b')];
    const q = new CallQueue(target([a, b], { perReplicaLimit: 2 }));
    const calls = [1, 2, 3, 4, 5, 6].map((k) => q.submit(input(k)));
    assert.deepEqual([a.inFlight, b.inFlight, q.queued], [2, 2, 2]);
    b.answerOldest();
    await settle();
    assert.deepEqual([a.inFlight, b.inFlight, q.queued], [2, 2, 1], 'the room one answer made is taken at once');
    while (a.held.length + b.held.length > 0) {
      for (const r of [a, b]) if (r.held.length > 0) r.answerOldest();
      await settle();
    }
    await Promise.all(calls);
  });
});

describe('CallQueue: retries', { timeout: 10_000 }, () => {
  test('a call whose replica died goes to another replica, ahead of the calls waiting', async () => {
    const [a, b] = [new FakeReplica('a'), new FakeReplica('b')];
    const q = new CallQueue(target([a, b], { perReplicaLimit: 1 }));
    const calls = [1, 2, 3].map((k) => q.submit(input(k)));
    a.failOldest(new TroupeError('TROUPE_ERR_ACTOR_DIED', 'a exited'));
    await settle();
    assert.deepEqual(a.seen, [1, 1], 'the retried call goes before call 3, which waited longer in the queue but arrived later');
    a.answerOldest();
    b.answerOldest();
    await settle();
    (a.held.length ? a : b).answerOldest();
    const results = await Promise.all(calls);
    assert.deepEqual(
      results.map((r) => labelOf(r.outputs)),
      [1, 2, 3],
    );
  });

  test('a replica that is shutting down also never ran the call: it is retried', async () => {
    const [a, b] = [new FakeReplica('a'), new FakeReplica('b')];
    const t = target([a, b], { perReplicaLimit: 1 });
    const q = new CallQueue(t);
    const call = q.submit(input(1));
    t.serving = [b];
    a.failOldest(new TroupeError('TROUPE_ERR_SHUTTING_DOWN', 'a is draining'));
    await settle();
    assert.deepEqual(b.seen, [1]);
    b.answerOldest();
    assert.equal(labelOf((await call).outputs), 1);
  });

  test('past maxRetries the call fails with the last error', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a], { maxRetries: 2 }));
    const call = q.submit(input(1));
    for (let attempt = 1; attempt <= 3; attempt++) {
      assert.equal(a.seen.length, attempt, `attempt ${attempt} was sent`);
      a.failOldest(new TroupeError('TROUPE_ERR_ACTOR_DIED', `died on attempt ${attempt}`));
      await settle();
    }
    await assert.rejects(call, { code: 'TROUPE_ERR_ACTOR_DIED', message: 'died on attempt 3' });
    assert.equal(a.seen.length, 3, 'one try and two retries');
  });

  test('an error of the model is not retried; anything not a TroupeError is INTERNAL', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a]));
    const model = q.submit(input(1));
    const odd = q.submit(input(2));
    a.failOldest(new TroupeError('TROUPE_ERR_INFERENCE', 'bad shape'));
    a.failOldest(new Error('socket said something odd'));
    assert.equal(await codeOf(model), 'TROUPE_ERR_INFERENCE');
    await assert.rejects(odd, { code: 'TROUPE_ERR_INTERNAL', message: /socket said something odd/ });
    assert.deepEqual(a.seen, [1, 2]);
  });
});

describe('CallQueue: overload', { timeout: 10_000 }, () => {
  test('past maxQueue waiting calls a new call fails at once with OVERLOADED', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a], { perReplicaLimit: 1, maxQueue: 2 }));
    const accepted = [1, 2, 3].map((k) => q.submit(input(k)));
    await assert.rejects(q.submit(input(4)), { code: 'TROUPE_ERR_OVERLOADED', message: /'mlp' has 2 calls waiting \(maxQueue 2\)/ });
    assert.equal(q.queued, 2);
    for (let i = 0; i < 3; i++) {
      a.answerOldest();
      await settle();
    }
    await Promise.all(accepted);
    // Room again: the queue takes calls once more.
    const later = q.submit(input(5));
    a.answerOldest();
    await later;
  });

  test('a full queue still takes a call a replica has room for', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a], { perReplicaLimit: 1, maxQueue: 0 }));
    const call = q.submit(input(1));
    assert.deepEqual(a.seen, [1]);
    a.answerOldest();
    await call;
  });
});

describe('CallQueue: deadlines and replicas that cannot serve', { timeout: 10_000 }, () => {
  test('a deadline already past fails at once, unsent', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a]));
    await assert.rejects(q.submit(input(1), { deadline: Date.now() - 1 }), {
      code: 'TROUPE_ERR_DEADLINE_EXCEEDED',
      message: /before the call was sent/,
    });
    assert.deepEqual(a.seen, []);
  });

  test('a replica is told the time the call has left', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a]));
    const call = q.submit(input(1), { deadline: Date.now() + 5_000 });
    const left = a.held[0]!.timeoutMs!;
    assert.ok(left > 4_000 && left <= 5_000, `${left} ms left`);
    a.answerOldest();
    await call;
    const noDeadline = q.submit(input(2));
    assert.equal(a.held[0]!.timeoutMs, undefined);
    a.answerOldest();
    await noDeadline;
  });

  test('a waiting call whose deadline passes is dropped unsent, and the queue no longer counts it', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a], { perReplicaLimit: 1 }));
    const first = q.submit(input(1));
    const late = q.submit(input(2), { deadline: Date.now() + 20 });
    const patient = q.submit(input(3));
    assert.equal(q.queued, 2);
    // Bounded: the deadline timer fires after 20 ms; the test's own timeout is the bound.
    assert.equal(await codeOf(late), 'TROUPE_ERR_DEADLINE_EXCEEDED');
    assert.equal(q.queued, 1);
    a.answerOldest();
    await settle();
    assert.deepEqual(a.seen, [1, 3], 'call 2 never reached the replica');
    a.answerOldest();
    await Promise.all([first, patient]);
  });

  test('a call no replica takes within the queue bound fails naming the replicas and why they do not serve', async (t) => {
    // Mocked timers: the bound is a minute.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const waiting = target([]);
    waiting.describeReplicas = () => 'mlp#0 PENDING: no node is ALIVE (1 known)';
    const q = new CallQueue(waiting);
    const call = q.submit(input(1));
    t.mock.timers.tick(MAX_QUEUE_WAIT_MS);
    await assert.rejects(call, {
      code: 'TROUPE_ERR_DEADLINE_EXCEEDED',
      message: `deployment 'mlp': no replica took it within ${MAX_QUEUE_WAIT_MS} ms (mlp#0 PENDING: no node is ALIVE (1 known))`,
    });
    assert.equal(q.queued, 0);
  });

  test('waiting calls fail with NOT_READY, naming the replicas, once none could ever serve', async () => {
    const a = new FakeReplica('a');
    const t = target([a], { perReplicaLimit: 1 });
    const q = new CallQueue(t);
    const sent = q.submit(input(1));
    const waiting = q.submit(input(2));
    t.canServe = false;
    q.pump();
    await assert.rejects(waiting, { code: 'TROUPE_ERR_NOT_READY', message: /'mlp' has no replica that can serve \(a READY\)/ });
    assert.equal(q.queued, 0);
    a.answerOldest();
    await sent;
  });

  test('failAll rejects every waiting call with the error given, and leaves sent calls alone', async () => {
    const a = new FakeReplica('a');
    const q = new CallQueue(target([a], { perReplicaLimit: 1 }));
    const sent = q.submit(input(1));
    const waiting = [2, 3].map((k) => q.submit(input(k)));
    q.failAll(new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', "deployment 'mlp' was removed"));
    for (const w of waiting) assert.equal(await codeOf(w), 'TROUPE_ERR_UNKNOWN_DEPLOYMENT');
    assert.equal(q.queued, 0);
    await sleep(0);
    a.answerOldest();
    assert.equal(labelOf((await sent).outputs), 1);
  });
});

describe('multiplexed deployments', () => {
  test('a call for a model goes to the replica that was sent it, even a busier one, until that one is four times full', () => {
    const a = new FakeReplica('a');
    const b = new FakeReplica('b');
    const queue = new CallQueue({ ...target([a, b]), maxModels: 2 });
    void queue.submit(input(1), { model: 'm' });
    const [holder, other] = a.seen.length > 0 ? [a, b] : [b, a];
    // The other is idle, but the holder has m: the next calls for m go to it, up to 4 x 2 in flight.
    for (let k = 2; k <= 8; k++) void queue.submit(input(k), { model: 'm' });
    assert.deepEqual(holder.seen, [1, 2, 3, 4, 5, 6, 7, 8]);
    void queue.submit(input(9), { model: 'm' });
    assert.deepEqual(other.seen, [9], 'past four times its room, a call goes to a replica with room');
    // A model neither holds goes to a replica with room.
    void queue.submit(input(10), { model: 'n' });
    assert.deepEqual(other.seen, [9, 10]);
  });

  test("beyond maxModels, the queue's picture of a replica forgets its least recently sent model", async () => {
    const a = new FakeReplica('a');
    const b = new FakeReplica('b');
    const t = { ...target([a]), maxModels: 2 };
    const queue = new CallQueue(t);
    for (const [k, model] of ['m1', 'm2', 'm3'].entries()) {
      void queue.submit(input(k), { model });
      a.answerOldest();
      await settle();
    }
    // a holds m2 and m3 now; two calls for m3 fill its usual room.
    void queue.submit(input(3), { model: 'm3' });
    void queue.submit(input(4), { model: 'm3' });
    t.serving.push(b);
    void queue.submit(input(5), { model: 'm2' });
    void queue.submit(input(6), { model: 'm1' });
    assert.deepEqual([a.seen, b.seen], [[0, 1, 2, 3, 4, 5], [6]]);
  });
});
