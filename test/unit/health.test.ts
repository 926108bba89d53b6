import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorHealth } from '../../node-agent/health.js';

const options = { intervalMs: 100, timeoutMs: 1000, maxInferenceMs: 5000 };

test('an actor that answers pings is healthy', () => {
  const h = new ActorHealth(options);
  h.cpu(1);
  h.observe({ type: 'pong', seq: h.ping().seq });
  assert.equal(h.verdict(Date.now() + 500), null);
});

test('silent and burning no CPU past the timeout: hung', () => {
  const h = new ActorHealth(options);
  h.cpu(1);
  h.observe({ type: 'pong', seq: 1 });
  h.cpu(1);
  assert.match(h.verdict(Date.now() + 1500) ?? '', /no answer to health checks for \d+ ms and no CPU used meanwhile/);
});

test('silent but computing (CPU time rising) inside a long inference: not hung until maxInferenceMs', () => {
  const h = new ActorHealth(options);
  h.cpu(1);
  h.observe({ type: 'pong', seq: 1 });
  h.cpu(2.5);
  assert.equal(h.verdict(Date.now() + 1500), null);
  assert.match(h.verdict(Date.now() + 6000) ?? '', /limit 5000 ms even while computing/);
});

test('messages that are not pongs are ignored', () => {
  const h = new ActorHealth(options);
  h.cpu(1);
  h.observe({ type: 'pong', seq: 1 });
  h.observe({ type: 'busy' });
  h.observe('garbage');
  assert.ok(h.verdict(Date.now() + 1500));
});
