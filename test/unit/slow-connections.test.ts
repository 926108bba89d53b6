import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { SLOW_AFTER_MS, SlowConnections } from '../../actors/slow-connections.js';
import type { SlowReport } from '../../actors/slow-connections.js';

const fakeSocket = () => new PassThrough() as unknown as Socket;

describe("a replica's slow connections", () => {
  test('a request that completes at once costs no report; one slow for a second is reported, and its end too', async () => {
    const reports: SlowReport[] = [];
    const slow = new SlowConnections((r) => reports.push(r));
    const quick = fakeSocket();
    for (let i = 0; i < 50; i++) {
      slow.bodyStarted(quick);
      slow.requestComplete(quick);
    }
    assert.equal(quick.listenerCount('close'), 1, 'one close listener per connection, however many requests');
    const dripping = fakeSocket();
    const began = Date.now();
    slow.bodyStarted(dripping);
    await new Promise((resolve) => setTimeout(resolve, SLOW_AFTER_MS + 200));
    assert.equal(reports.length, 1, `reports: ${JSON.stringify(reports)}`);
    assert.equal(reports[0]!.count, 1);
    assert.ok(Math.abs(reports[0]!.oldest! - began) <= 5, 'the report says when the slow request began');
    assert.equal(slow.evictOldest(), true);
    assert.equal(dripping.destroyed, true, "the oldest slow connection is closed at the head's word");
    assert.deepEqual(reports.at(-1), { count: 0 });
    assert.equal(slow.evictOldest(), false, 'nothing left to close');
  });
});
