import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newActorRecord, newDeployment } from '../../head/state/record-changes.js';
import type { DeploymentRecord } from '../../head/state/records.js';
import { RouteBook } from '../../head/state/route-book.js';
import type { Channel, ClientToHead, HeadToClient } from '../../runtime/internal.js';
import { ModelDeploymentSchema } from '../../runtime/spec.js';
import { FakeActorLink } from '../helpers/fake-agent.js';
import { ManualClock } from '../helpers/manual-clock.js';

// A subscribed client is sent a deployment's routes again only when they differ from what it was
// last sent: a change elsewhere, or one that leaves its routes as they were, sends nothing.

/** A client connection as the route book sees it: what it was sent, and a close that never comes. */
function client(): { channel: Channel<ClientToHead, HeadToClient>; sent: HeadToClient[] } {
  const sent: HeadToClient[] = [];
  const channel = { send: (m: HeadToClient) => sent.push(m), whenClosed: new Promise<void>(() => {}) };
  return { channel: channel as unknown as Channel<ClientToHead, HeadToClient>, sent };
}

function deployment(name: string, replicas: number): DeploymentRecord {
  const d = newDeployment(ModelDeploymentSchema.parse({ name, model: `${name}.onnx`, replicas }), 0);
  const clock = new ManualClock();
  d.actors = Array.from({ length: replicas }, (_, i) => {
    const a = newActorRecord(d, i);
    Object.assign(a, {
      state: 'READY',
      link: new FakeActorLink(clock),
      direct: { url: `http://127.0.0.1:9/${i}`, token: `token-${i}`.padEnd(16, '0') },
    });
    return a;
  });
  return d;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('routes are pushed when they differ from those sent, and only then', async () => {
  const deployments = new Map([
    ['mlp', deployment('mlp', 3)],
    ['other', deployment('other', 2)],
  ]);
  const book = new RouteBook(deployments);
  const watcher = client();
  assert.equal(book.subscribe('mlp', watcher.channel).replicas.length, 3);

  // Another deployment's replica leaves: nothing for this client.
  deployments.get('other')!.actors[0]!.state = 'STARTING';
  book.changed();
  await turn();
  assert.equal(watcher.sent.length, 0);

  // A replica of its deployment leaves and comes back; then one gets a new token (the same count of replicas).
  const mlp = deployments.get('mlp')!;
  mlp.actors[1]!.state = 'STARTING';
  book.changed();
  await turn();
  assert.deepEqual(
    watcher.sent.map((m) => (m.type === 'routes' ? m.routes.replicas.map((r) => r.actor) : [])),
    [[mlp.actors[0]!.id, mlp.actors[2]!.id]],
  );
  mlp.actors[1]!.state = 'READY';
  book.changed();
  await turn();
  assert.equal(watcher.sent.length, 2);
  mlp.actors[0]!.direct = { url: 'http://127.0.0.1:9/0', token: 'a-new-token-000000' };
  book.changed();
  await turn();
  assert.equal(watcher.sent.length, 3, 'a new token alone is a change');
  const last = watcher.sent[2]!;
  assert.ok(last.type === 'routes');
  assert.equal(last.routes.replicas[0]!.token, 'a-new-token-000000');
  assert.equal(last.routes.replicas.length, 3);

  // A limit changes with the spec: pushed; the same again: not.
  mlp.spec = { ...mlp.spec, maxQueue: mlp.spec.maxQueue + 1 };
  book.changed();
  await turn();
  book.changed();
  await turn();
  assert.equal(watcher.sent.length, 4);
});
