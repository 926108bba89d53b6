import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { DEFAULT_GROUP, Slots } from '../../actors/slots.js';
import { propertySeed } from '../helpers/values.js';

// The calls of one class instance (actors/slots.ts): up to N at once, started in arrival order,
// a restore alone. A model-based test: random arrivals and completions, invariants after each.

type Command =
  | { kind: 'submit'; exclusive: boolean; throws: boolean }
  | { kind: 'finish'; pick: number; fail: boolean }
  | { kind: 'cancel'; pick: number };

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant('submit' as const), exclusive: fc.integer({ min: 0, max: 4 }).map((n) => n === 0), throws: fc.boolean() }),
  fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), fail: fc.boolean() }),
  fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
);

/**
 * A cancel or finish command, as both models apply it: a cancel aborts a job still waiting (one
 * running is the method's to stop), a finish ends a running one, picked by the command.
 */
function cancelOrFinish(
  c: { kind: 'finish'; pick: number; fail: boolean } | { kind: 'cancel'; pick: number },
  submitted: readonly { id: number; cancel: AbortController }[],
  started: readonly number[],
  cancelled: Set<number>,
  running: Map<number, { finish: (fail: boolean) => void }>,
): void {
  if (c.kind === 'cancel') {
    const waiting = submitted.filter((j) => !started.includes(j.id) && !cancelled.has(j.id));
    const job = waiting[c.pick % Math.max(1, waiting.length)];
    if (job) {
      cancelled.add(job.id);
      job.cancel.abort(new Error('cancelled'));
    }
  } else if (running.size > 0) {
    const ids = [...running.keys()];
    const id = ids[c.pick % ids.length]!;
    running.get(id)!.finish(c.fail);
    running.delete(id);
  }
}

describe('slots: up to N calls of an instance at once, in arrival order', () => {
  test('never more than N run, none overtakes, an exclusive job runs alone, a cancelled waiting job never runs, and nothing stalls', async () => {
    const seed = propertySeed();
    const result = await fc.check(
      fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(command, { maxLength: 60 }), async (limit, commands) => {
        const slots = new Slots(limit);
        const submitted: { id: number; exclusive: boolean; cancel: AbortController }[] = [];
        const cancelled = new Set<number>();
        const started: number[] = [];
        const running = new Map<number, { exclusive: boolean; finish: (fail: boolean) => void }>();
        const settled: number[] = [];
        for (const c of commands) {
          if (c.kind === 'submit') {
            const id = submitted.length;
            const cancel = new AbortController();
            submitted.push({ id, exclusive: c.exclusive, cancel });
            void slots
              .run(
                c.exclusive,
                () => {
                  started.push(id);
                  // A job that throws at once frees its slot as one that fails later does.
                  if (c.throws) throw new Error('thrown');
                  return new Promise<void>((resolve, reject) => {
                    running.set(id, { exclusive: c.exclusive, finish: (fail) => (fail ? reject(new Error('failed')) : resolve()) });
                  });
                },
                cancel.signal,
              )
              .then(
                () => settled.push(id),
                () => settled.push(id),
              );
          } else cancelOrFinish(c, submitted, started, cancelled, running);
          await turn();
          await turn();
          // In arrival order: what started is a prefix of what arrived and was not cancelled.
          const live = submitted.filter((j) => !cancelled.has(j.id));
          assert.deepEqual(
            started,
            live.slice(0, started.length).map((s) => s.id),
          );
          const now = slots.running;
          assert.ok(now <= limit, `${now} running over the limit ${limit}`);
          assert.equal(now, running.size);
          if ([...running.values()].some((r) => r.exclusive)) assert.equal(now, 1, 'an exclusive job runs alone');
          assert.equal(slots.queued, submitted.length - settled.length);
          // Nothing stalls: a job waits only for a full instance, an exclusive one running, or, exclusive itself, for the instance to empty.
          const next = live[started.length];
          if (next) {
            const busy = now >= limit || [...running.values()].some((r) => r.exclusive) || (next.exclusive && now > 0);
            assert.ok(busy, `job ${next.id} waits with ${now} of ${limit} running`);
          }
        }
        for (const r of running.values()) r.finish(false);
      }),
      { seed, numRuns: 200 },
    );
    if (result.failed)
      assert.fail(
        `property failed with seed ${seed} (replay with TROUPE_TEST_SEED=${seed}); shrunk case: ${fc.stringify(result.counterexample)}\n${String(result.errorInstance)}`,
      );
  });

  test('concurrency groups: each within its limit, FIFO within a group, none waits behind another group, an exclusive job alone', async () => {
    const seed = propertySeed();
    const groupCommand: fc.Arbitrary<Command & { group?: number }> = fc.oneof(
      fc.record({
        kind: fc.constant('submit' as const),
        exclusive: fc.integer({ min: 0, max: 6 }).map((n) => n === 0),
        throws: fc.boolean(),
        group: fc.nat({ max: 3 }),
      }),
      fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), fail: fc.boolean() }),
      fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
    );
    const result = await fc.check(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 3 }),
        fc.array(groupCommand, { maxLength: 80 }),
        async (defaultLimit, named, commands) => {
          const names = [DEFAULT_GROUP, ...named.map((_, i) => `g${i}`)];
          const limits = new Map(names.map((n, i) => [n, i === 0 ? defaultLimit : named[i - 1]!]));
          const slots = new Slots(defaultLimit, Object.fromEntries(names.slice(1).map((n) => [n, limits.get(n)!])));
          interface Submitted {
            id: number;
            group: string;
            exclusive: boolean;
            cancel: AbortController;
          }
          const submitted: Submitted[] = [];
          const cancelled = new Set<number>();
          const started: number[] = [];
          const running = new Map<number, { job: Submitted; finish: (fail: boolean) => void }>();
          const settled = new Set<number>();
          for (const c of commands) {
            if (c.kind === 'submit') {
              const job: Submitted = {
                id: submitted.length,
                group: names[(c.group ?? 0) % names.length]!,
                exclusive: c.exclusive,
                cancel: new AbortController(),
              };
              submitted.push(job);
              void slots
                .run(
                  c.exclusive,
                  () => {
                    started.push(job.id);
                    if (c.throws) throw new Error('thrown');
                    return new Promise<void>((resolve, reject) => {
                      running.set(job.id, { job, finish: (fail) => (fail ? reject(new Error('failed')) : resolve()) });
                    });
                  },
                  job.cancel.signal,
                  job.group,
                )
                .then(
                  () => settled.add(job.id),
                  () => settled.add(job.id),
                );
            } else cancelOrFinish(c, submitted, started, cancelled, running);
            await turn();
            await turn();
            const live = submitted.filter((j) => !cancelled.has(j.id));
            const isStarted = (j: Submitted) => started.includes(j.id);
            // FIFO within a group (exclusive jobs form a queue of their own).
            const queues = [...names.map((n) => live.filter((j) => !j.exclusive && j.group === n)), live.filter((j) => j.exclusive)];
            for (const q of queues) {
              const n = q.filter(isStarted).length;
              assert.deepEqual(
                q.slice(0, n).map((j) => j.id),
                q.filter(isStarted).map((j) => j.id),
                `jobs of one group start in arrival order`,
              );
            }
            const now = [...running.values()].map((r) => r.job);
            const load = slots.load();
            for (const n of names) {
              const inGroup = now.filter((j) => !j.exclusive && j.group === n).length;
              assert.ok(inGroup <= limits.get(n)!, `${inGroup} running in group ${n} over its limit ${limits.get(n)}`);
              assert.equal(load[n]!.running, inGroup);
            }
            assert.equal(slots.running, running.size);
            if (now.some((j) => j.exclusive)) assert.equal(now.length, 1, 'an exclusive job runs alone');
            assert.equal(slots.queued, submitted.length - settled.size);
            // Nothing overtakes an exclusive job: a job that arrived after one still waiting has not started.
            const barrier = live.find((j) => j.exclusive && !isStarted(j));
            if (barrier) assert.ok(!live.some((j) => j.id > barrier.id && isStarted(j)), `a job started past exclusive job ${barrier.id}`);
            // Nothing stalls: the next job of each queue waits only on its own group, or on an exclusive job.
            const exclusiveRunning = now.some((j) => j.exclusive);
            for (const n of names) {
              const next = live.find((j) => !j.exclusive && j.group === n && !isStarted(j));
              if (!next) continue;
              const full = now.filter((j) => !j.exclusive && j.group === n).length >= limits.get(n)!;
              const behindBarrier = barrier !== undefined && barrier.id < next.id;
              assert.ok(full || exclusiveRunning || behindBarrier, `job ${next.id} of group ${n} waits though its group has room`);
            }
            if (barrier) {
              const earlier = live.some((j) => j.id < barrier.id && !settled.has(j.id));
              assert.ok(now.length > 0 || earlier, `exclusive job ${barrier.id} waits on an empty instance`);
            }
          }
          for (const r of running.values()) r.finish(false);
        },
      ),
      { seed, numRuns: 300 },
    );
    if (result.failed)
      assert.fail(
        `property failed with seed ${seed} (replay with TROUPE_TEST_SEED=${seed}); shrunk case: ${fc.stringify(result.counterexample)}\n${String(result.errorInstance)}`,
      );
  });

  test('a limit below 1 is refused, and so is a job of a group the slots do not have', async () => {
    assert.throws(() => new Slots(0), RangeError);
    assert.throws(() => new Slots(1, { io: 0 }), /group 'io'/);
    await assert.rejects(
      new Slots(1, { io: 2 }).run(false, () => Promise.resolve(), undefined, 'compute'),
      /no concurrency group 'compute'/,
    );
  });
});
