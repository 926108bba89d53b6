import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { ERRORS, TroupeError, fromWireError, toWireError } from '../../runtime/internal.js';

test('docs/errors.md lists exactly the codes in runtime/errors.ts, with the same status and retryability', async () => {
  const doc = await readFile(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  const rows = [...doc.matchAll(/^\| `(TROUPE_ERR_[A-Z_]+)` \| (\d+) \| (yes|no) \| (.+) \|$/gm)].map((m) => [
    m[1],
    Number(m[2]),
    m[3] === 'yes',
  ]);
  const code = Object.entries(ERRORS).map(([name, e]) => [name, e.status, e.retryable]);
  assert.deepEqual(rows, code);
});

test('codes are unique, prefixed, and every status is an HTTP error status', () => {
  for (const [name, e] of Object.entries(ERRORS)) {
    assert.match(name, /^TROUPE_ERR_[A-Z_]+$/);
    assert.ok(e.status >= 400 && e.status < 600, name);
    assert.ok(e.what.length > 10, name);
  }
});

test('errors cross the wire as { code, message } and come back equal', () => {
  const err = new TroupeError('TROUPE_ERR_OVERLOADED', 'queue full');
  const back = fromWireError(toWireError(err));
  assert.equal(back.code, 'TROUPE_ERR_OVERLOADED');
  assert.equal(back.message, 'queue full');
  assert.equal(back.status, 429);
  assert.equal(back.retryable, true);
  assert.deepEqual(toWireError(new RangeError('boom')), { code: 'TROUPE_ERR_INTERNAL', message: 'boom' });
});

test("instanceof TroupeError holds across the client package's build and the server's own, and a subclass keeps its own check", async () => {
  const client = await import('@troupe/client');
  assert.notEqual(client.TroupeError, TroupeError, 'two builds of runtime/errors.ts');
  // A class actor's method throws the client's (imported from 'troupe'); the actor host checks with its own.
  const thrown = new client.TroupeError('TROUPE_ERR_BAD_REQUEST', 'from user code');
  assert.ok(thrown instanceof TroupeError);
  assert.ok(new TroupeError('TROUPE_ERR_INTERNAL', 'from the server') instanceof client.TroupeError);
  assert.equal(toWireError(thrown).code, 'TROUPE_ERR_BAD_REQUEST');
  assert.ok(!(new Error('plain') instanceof TroupeError));
  assert.ok(!(({ code: 'TROUPE_ERR_INTERNAL' } as object) instanceof TroupeError));
  class Narrower extends TroupeError {}
  assert.ok(new Narrower('TROUPE_ERR_INTERNAL', 'x') instanceof TroupeError);
  assert.ok(!(thrown instanceof Narrower));
});

test("instanceof ActorHandle holds across the client package's build and the server's own, as TroupeError's does", async () => {
  const client = await import('@troupe/client');
  const { ActorHandle } = await import('../../runtime/internal.js');
  assert.notEqual(client.ActorHandle, ActorHandle, 'two builds of runtime/client/actor-handle.ts');
  type Make = new (name: string, transport: object) => object;
  // Inside a class actor a handle comes from the server's build; the actor's module imports the class from 'troupe'.
  const servers = new (ActorHandle as unknown as Make)('counter', {});
  const clients = new (client.ActorHandle as unknown as Make)('counter', {});
  assert.ok(servers instanceof client.ActorHandle);
  assert.ok(clients instanceof ActorHandle);
  assert.ok(!(({ name: 'counter' } as object) instanceof client.ActorHandle), 'a look-alike is no handle');
});
