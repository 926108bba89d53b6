import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { ActorView, Cluster, TroupeError } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';

const CLASSES = 'test/fixtures/classes.js';

describe('class actors restart with back-off, restoring their checkpoint', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  const instance = async (name: string): Promise<ActorView> =>
    (await client.describe()).deployments.find((d) => d.name === name)!.actors[0]!;
  const readyAgain = (name: string, restarts: number) =>
    waitFor(`${name} READY after ${restarts} restart(s)`, async () => {
      const a = await instance(name);
      return a.state === 'READY' && a.restarts >= restarts && a;
    });

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a crashed instance comes back in a new process with the state of its last checkpoint', async () => {
    const counter = await client.actor({ name: 'counter', module: CLASSES, export: 'Counter', args: [100], cpus: 0.1 });
    await counter.call('add', 23);
    await counter.call('append', 'kept', 0);
    const pid = await counter.call<number>('pid');
    await rejectsWith(counter.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /exited or lost its connection before answering/);
    const back = await readyAgain('counter', 1);
    assert.notEqual(back.pid, pid);
    assert.equal(await counter.call<number>('pid'), back.pid);
    assert.equal(await counter.call('total'), 123);
    assert.deepEqual(await counter.call('append', 'after', 0), ['kept', 'after']);
    // The class reports its state size (stateSize()), and the head shows it with the instance's totals.
    const sized = await waitFor('stateBytes reported', async () => (await instance('counter')).stats?.stateBytes);
    assert.equal(sized, 8 + ('kept'.length + 'after'.length) * 2);
  });

  test('a class without checkpoint() starts fresh after a restart, and a caller that saw its state is told once that it is gone', async () => {
    const notebook = await client.actor({ name: 'notebook', module: CLASSES, export: 'Notebook', cpus: 0.1 });
    assert.equal(await notebook.call('write', 'lost on restart'), 1);
    // Over HTTP, a caller that sends back what an answer said it was served from is told the same.
    const write = (seen?: Record<string, string>) =>
      fetch(`${cluster.url}/api/v1/actors/notebook/write`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ args: ['over http'], ...(seen ? { seen } : {}) }),
      });
    const answer = (await (await write()).json()) as { value: number; instance: string; stateId: string };
    assert.equal(answer.value, 2);
    assert.equal(answer.instance, 'notebook#0');
    assert.match(answer.stateId, /^[0-9a-z]{12}$/);

    await rejectsWith(notebook.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /before answering/);
    await readyAgain('notebook', 1);
    const lost = await rejectsWith(
      notebook.call('read'),
      'TROUPE_ERR_STATE_LOST',
      /instance notebook#0 restarted \(exited with code 7.*\) with no checkpoint to restore.*the state this client's earlier calls left on it is lost, and read\(\) did not run/,
    );
    assert.equal(lost.retryable, false);
    // Said once: the next call runs on the fresh instance.
    assert.deepEqual(await notebook.call('read'), []);
    const told = await write({ [answer.instance]: answer.stateId });
    assert.equal(told.status, 410);
    assert.equal(((await told.json()) as { code: string }).code, 'TROUPE_ERR_STATE_LOST');
    // The refused call did not run; one without what it saw does.
    assert.deepEqual(await notebook.call('read'), []);
    assert.equal(((await (await write()).json()) as { value: number }).value, 1);
  });

  test('an instance whose restore() throws takes no calls, and after its restarts is DEAD saying why', async () => {
    const bad = await client.actor({ name: 'bad-restore', module: CLASSES, export: 'BadRestore', cpus: 0.1 });
    assert.equal(await bad.call('bump'), 1);
    await rejectsWith(bad.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /before answering/);
    const dead = await waitFor(
      'bad-restore DEAD',
      async () => {
        const a = await instance('bad-restore');
        return a.state === 'DEAD' && a;
      },
      60_000,
    );
    assert.match(dead.reason ?? '', /BadRestore.restore\(\) threw: the checkpoint is from another version/);
    assert.match(dead.reason ?? '', /gave up after 5 restarts/);
    // Calls to a DEAD actor fail at once, not retryable, with the cause.
    const refused = await bad.call('bump').then(
      () => assert.fail('a call to a DEAD actor answered'),
      (err: unknown) => err as TroupeError,
    );
    assert.equal(refused.code, 'TROUPE_ERR_ACTOR_DEAD');
    assert.equal(refused.retryable, false);
    assert.match(refused.message, /actor 'bad-restore' has no instance that can take calls \(bad-restore#0 DEAD: .*restore\(\) threw/);
  });

  test('a session of a class with checkpoint() continues through a restart with its state; one whose instance is DEAD is told it lost it', async () => {
    const counter = client.actorHandle('counter');
    const carol = counter.session('carol');
    const total = await carol.call<number>('add', 1);
    await rejectsWith(carol.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /before answering/);
    assert.equal(await carol.withOptions({ timeoutMs: 30_000 }).call('total'), total);
    const bad = client.actorHandle('bad-restore');
    await rejectsWith(bad.session('dave').call('bump'), 'TROUPE_ERR_ACTOR_DEAD', /bad-restore#0 DEAD/);
  });

  test('an instance whose restore() never settles is restarted at its restoreTimeoutS, and ends DEAD saying so', async () => {
    const hanging = await client.actor({
      name: 'hanging-restore',
      module: CLASSES,
      export: 'HangingRestore',
      cpus: 0.1,
      restoreTimeoutS: 0.5,
    });
    assert.equal(await hanging.call('bump'), 1);
    await rejectsWith(hanging.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /before answering/);
    const dead = await waitFor(
      'hanging-restore DEAD',
      async () => {
        const a = await instance('hanging-restore');
        return a.state === 'DEAD' && a;
      },
      90_000,
    );
    assert.match(dead.reason ?? '', /HangingRestore.restore\(\) did not settle within 0.5 s \(restoreTimeoutS\)/);
    assert.match(dead.reason ?? '', /gave up after 5 restarts/);
  });

  test('restoreTimeoutS belongs to class actors only', async () => {
    await rejectsWith(
      client.deploy({ name: 'not-a-class', model: 'mlp.onnx', restoreTimeoutS: 5 }),
      'TROUPE_ERR_BAD_SPEC',
      /only a class actor \(kind 'class'\) restores checkpoints/,
    );
  });

  test('a head restart keeps every instance and its state: the processes rejoin the new head', async () => {
    const notebook = client.actorHandle('notebook');
    await notebook.call('write', 'before the head restart');
    const pid = await notebook.call<number>('pid');
    await cluster.restartHead('SIGKILL');
    const back = await waitFor('notebook callable through the new head', () =>
      notebook
        .withOptions({ timeoutMs: 2000 })
        .call<string[]>('read')
        .catch(() => undefined),
    );
    assert.deepEqual(back.slice(-1), ['before the head restart']);
    assert.equal(await notebook.call('pid'), pid);
  });

  test('an instance that died while the head was down comes back fresh, and its callers are told its state is gone', async () => {
    const notebook = client.actorHandle('notebook');
    await notebook.call('write', 'held by the process that dies');
    const pid = await notebook.call<number>('pid');
    await cluster.restartHead('SIGKILL', async () => {
      process.kill(pid, 'SIGKILL');
    });
    const lost = await waitFor('the restarted instance answers', () =>
      notebook
        .withOptions({ timeoutMs: 2000 })
        .call<string[]>('read')
        .then(
          () => assert.fail('a fresh instance answered as if nothing happened'),
          (err: unknown) => ((err as TroupeError).code === 'TROUPE_ERR_STATE_LOST' ? (err as TroupeError) : undefined),
        ),
    );
    assert.match(lost.message, /instance notebook#0 restarted .*with no checkpoint to restore/);
    assert.deepEqual(await notebook.call('read'), []);
    assert.notEqual(await notebook.call('pid'), pid);
  });
});
