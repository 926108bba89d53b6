import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { BodyBudget } from '../../head/http/body-budget.js';

describe('BodyBudget: the bytes of large bodies read at once', () => {
  test('against a model: bodies start in the order asked, never past the budget (one larger than it only alone), and every one starts once the ones before it give back (fast-check, seeded)', () => {
    const seed = Number(process.env.FC_SEED ?? 11);
    const op = fc.oneof(
      fc.record({ ask: fc.integer({ min: 1, max: 150 }) }),
      fc.record({ giveBack: fc.nat() }),
      fc.record({ withdraw: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.array(op, { maxLength: 60 }), (total, ops) => {
        const budget = new BodyBudget(total);
        const asks: { bytes: number; started: boolean; gone: boolean; giveBack: () => void }[] = [];
        const startOrder: number[] = [];
        const held = () => asks.filter((a) => a.started && !a.gone);
        const check = () => {
          const bytes = held().reduce((n, a) => n + a.bytes, 0);
          assert.ok(bytes <= total || held().length === 1, `${bytes} bytes held against ${total}, by ${held().length} bodies`);
          // Nothing waits that could start: the first waiting one does not fit.
          const firstWaiting = asks.find((a) => !a.started && !a.gone);
          if (firstWaiting)
            assert.ok(held().length > 0 && bytes + Math.min(firstWaiting.bytes, total) > total, 'a body waits with room for it');
        };
        for (const o of ops) {
          if ('ask' in o) {
            const i = asks.length;
            const ask = { bytes: o.ask, started: false, gone: false, giveBack: () => {} };
            asks.push(ask);
            ask.giveBack = budget.take(o.ask, () => {
              assert.ok(!ask.started && !ask.gone, 'started twice, or after it was withdrawn');
              ask.started = true;
              startOrder.push(i);
            });
          } else {
            const live = asks.filter((a) => !a.gone && ('giveBack' in o ? a.started : !a.started));
            const a = live[('giveBack' in o ? o.giveBack : o.withdraw) % Math.max(1, live.length)];
            if (!a) continue;
            a.gone = true;
            a.giveBack();
            a.giveBack(); // a second call changes nothing
          }
          check();
        }
        const started = startOrder.filter((i) => !asks[i]!.gone || asks[i]!.started);
        assert.deepEqual(
          started,
          [...started].sort((x, y) => x - y),
          'started in the order asked',
        );
        // Giving back everything held lets every body still waiting start, in order.
        for (let a = held()[0]; a; a = held()[0]) {
          a.gone = true;
          a.giveBack();
          check();
        }
        assert.ok(
          asks.every((a) => a.started || a.gone),
          'a body never started though every other gave back',
        );
      }),
      { seed, numRuns: 300, verbose: true },
    );
  });

  test('a body that waits past its bound is read anyway, over the budget, and gives its bytes back like any other', async () => {
    const budget = new BodyBudget(100, 50);
    const order: string[] = [];
    const dripping = budget.take(80, () => order.push('dripping'));
    const waited = budget.take(80, () => order.push('waited'));
    assert.deepEqual(order, ['dripping']);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(order, ['dripping', 'waited'], 'the second body started after its bound though the first still held the budget');
    dripping();
    waited();
    // All given back: the whole budget is free again.
    budget.take(100, () => order.push('whole'));
    assert.deepEqual(order, ['dripping', 'waited', 'whole']);
  });
});
