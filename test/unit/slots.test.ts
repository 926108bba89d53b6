import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Slots } from '../../actors/slots.js';
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
          } else if (c.kind === 'cancel') {
            // Cancel a job still waiting (one running is the method's to stop).
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

  test('a limit below 1 is refused', () => {
    assert.throws(() => new Slots(0), RangeError);
  });
});
