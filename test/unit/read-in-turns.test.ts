import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { readInTurns } from '../../head/http/read-in-turns.js';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('readInTurns: a body read in turns of the event loop', () => {
  test('every byte arrives in order, no turn delivers more than the budget and one chunk, and holds pause it (fast-check, seeded)', async () => {
    const seed = Number(process.env.FC_SEED ?? 7);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 8000 }),
        fc.array(fc.boolean(), { maxLength: 40 }),
        async (sizes, budget, holds) => {
          const body = new PassThrough();
          const turns = readInTurns(body, budget);
          const got: Buffer[] = [];
          let inThisTurn = 0;
          let largestTurn = 0;
          let held = false;
          let deliveredWhileHeld = 0;
          body.on('data', (chunk: Buffer) => {
            got.push(chunk);
            if (held) deliveredWhileHeld++;
            inThisTurn += chunk.length;
            largestTurn = Math.max(largestTurn, inThisTurn);
          });
          const ended = new Promise((resolve) => body.once('end', resolve));
          const sent = sizes.map((n, i) => Buffer.alloc(n, i % 251));
          for (const chunk of sent) body.write(chunk);
          body.end();
          for (let turn = 0; !body.readableEnded && turn < 10_000; turn++) {
            inThisTurn = 0;
            if (holds[turn % Math.max(1, holds.length)]) {
              turns.hold('test');
              held = true;
              await nextTurn();
              held = false;
              turns.release('test');
            }
            await nextTurn();
          }
          await ended;
          assert.deepEqual(Buffer.concat(got), Buffer.concat(sent), 'the bytes arrive whole and in order');
          assert.equal(deliveredWhileHeld, 0, 'nothing is delivered while a hold is on');
          assert.ok(largestTurn < budget + Math.max(...sizes) + 1, `a turn delivered ${largestTurn} bytes against a budget of ${budget}`);
        },
      ),
      { seed, numRuns: 60, verbose: true },
    );
  });
});
