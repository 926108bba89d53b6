import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SessionStore } from '../../examples/generation/sessions.js';

const fresh = () => ({ state: new Float32Array(2), pending: 0, steps: 0 });

describe("the generator's sessions (examples/generation/sessions.ts)", () => {
  test('past the cap, the least recently used session is forgotten', () => {
    const store = new SessionStore({ maxSessions: 2, idleMs: 1000 }, () => 0);
    store.open('a', fresh);
    store.open('b', fresh);
    store.get('a'); // a is now the most recently used
    store.open('c', fresh);
    assert.deepEqual(
      store.entries().map(([key]) => key),
      ['a', 'c'],
    );
    assert.equal(store.size, 2);
  });

  test('a session idle for idleMs is forgotten; one in use is kept, and keeps its state', () => {
    let now = 0;
    const store = new SessionStore({ maxSessions: 10, idleMs: 100 }, () => now);
    store.open('idle', fresh);
    const busy = store.open('busy', fresh);
    busy.steps = 7;
    now = 60;
    assert.equal(store.get('busy'), busy);
    now = 100;
    assert.equal(store.get('idle'), undefined);
    assert.equal(store.get('busy')?.steps, 7);
    assert.deepEqual(store.list(), [{ session: 'busy', steps: 7, idleMs: 0 }]);
    now = 300;
    assert.deepEqual(store.list(), []);
  });

  test('open returns the existing session rather than a fresh one; delete forgets it', () => {
    const store = new SessionStore({ maxSessions: 10, idleMs: 100 }, () => 0);
    const s = store.open('x', fresh);
    s.pending = 5;
    assert.equal(store.open('x', fresh).pending, 5);
    assert.equal(store.delete('x'), true);
    assert.equal(store.delete('x'), false);
    assert.equal(store.open('x', fresh).pending, 0);
  });
});
