import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { cpuMs } from '../../bench/lib/process-cpu.js';
import { waitFor } from '../helpers/cluster.js';
import { suiteCluster } from '../helpers/suite-cluster.js';
import { call } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

/** CPU time (ms) replica `pid` used over `calls` calls to `name`, each after the last had ended and a pause (a window of its own). */
async function cpuOverCalls(client: Cluster, name: string, pid: number, calls: number): Promise<number> {
  const x = tensor('float32', [1, 64], seededFloats(64, 3));
  const before = cpuMs(pid);
  for (let i = 0; i < calls; i++) {
    await client.run(name, { x });
    // The next call comes after this one's window (10 ms at most) is over: each call's spin is counted alone.
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
  return cpuMs(pid) - before;
}

describe('idle spin: a replica polls for its next call for as long as its deployment says, and no longer', { timeout: 120_000 }, () => {
  const suite = suiteCluster();

  test('idleSpinMs named wins over the choice at load, says so, and a spinning replica holds its core after each call', async () => {
    const { client } = suite;
    const spinning = await client.deploy({ name: 'spins', model: 'mlp.onnx', cpus: 0.25, idleSpinMs: 10 });
    const still = await client.deploy({ name: 'still', model: 'mlp.onnx', cpus: 0.25, idleSpinMs: 0 });
    const spinLayout = spinning.actors[0]!.layout!;
    const stillLayout = still.actors[0]!.layout!;
    assert.equal(spinLayout.idleSpinMs, 10);
    assert.match(spinLayout.reason, /it polls 10 ms for the next call after its last, as the deployment names it/);
    assert.equal(stillLayout.idleSpinMs, 0);
    assert.match(stillLayout.reason, /it sleeps at once when idle, as the deployment names it \(idleSpinMs 0\)/);
    const described = (await client.describe()).deployments;
    assert.match(described.find((d) => d.name === 'spins')!.layout!.chosen, /, spinning 10 ms when idle/);
    assert.doesNotMatch(described.find((d) => d.name === 'still')!.layout!.chosen, /spinning/);
    // 40 calls with a 10 ms window each may hold the core for 400 ms; a busy machine takes some of
    // that (the spin ends by the clock, running or not), so the bound asked is a quarter of it.
    const calls = 40;
    const spun = await cpuOverCalls(client, 'spins', spinning.actors[0]!.pid!, calls);
    const slept = await cpuOverCalls(client, 'still', still.actors[0]!.pid!, calls);
    assert.ok(spun >= slept + 100, `the spinning replica used ${spun} ms of CPU over ${calls} calls, the sleeping one ${slept} ms`);
  });

  test('a value out of range, or where nothing spins, is refused with a message naming idleSpinMs', async () => {
    const { cluster } = suite;
    for (const [body, message] of [
      [{ model: 'mlp.onnx', idleSpinMs: 11 }, /idleSpinMs/],
      [{ model: 'mlp.onnx', idleSpinMs: -1 }, /idleSpinMs/],
      [{ model: 'mlp.onnx', idleSpinMs: 'fast' }, /idleSpinMs/],
      [{ kind: 'class', model: 'classes.js#Counter', idleSpinMs: 1 }, /only a model deployment spins while idle/],
    ] as const) {
      const put = await call(cluster.url, 'PUT', '/api/v1/deployments/bad-spin', {
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(put.status, 400, put.body.toString());
      const error = JSON.parse(put.body.toString()) as { code: string; error: string };
      assert.equal(error.code, 'TROUPE_ERR_BAD_SPEC', put.body.toString());
      assert.match(error.error, message);
    }
  });

  test('a named spin outlives a head restart and a replica killed, and an update that changes it gets replicas that spin as it says', async () => {
    const { cluster } = suite;
    await cluster.restartHead();
    const client = await connect(cluster.url);
    try {
      const readyReplica = (name: string, not?: number) =>
        waitFor(
          `a READY replica of '${name}'${not ? ` other than pid ${not}` : ''}`,
          async () => {
            const d = (await client.describe()).deployments.find((x) => x.name === name);
            return d?.actors.find((a) => a.state === 'READY' && typeof a.pid === 'number' && a.pid !== not && a.layout);
          },
          60_000,
        );
      const before = await readyReplica('spins');
      assert.equal(before.layout!.idleSpinMs, 10, 'the same replica, adopted by the new head');
      process.kill(before.pid!, 'SIGKILL');
      const after = await readyReplica('spins', before.pid!);
      assert.equal(after.layout!.idleSpinMs, 10, 'the replica started in its place spins as the spec the head kept says');
      const still = await readyReplica('still');
      const spun = await cpuOverCalls(client, 'spins', after.pid!, 40);
      const slept = await cpuOverCalls(client, 'still', still.pid!, 40);
      assert.ok(
        spun >= slept + 100,
        `after the restarts the spinning replica used ${spun} ms of CPU over 40 calls, the sleeping one ${slept} ms`,
      );
      const updated = await client.update({ name: 'still', model: 'mlp.onnx', cpus: 0.25, idleSpinMs: 2 });
      const replaced = updated.actors.filter((a) => a.state === 'READY');
      assert.equal(replaced.length, 1);
      assert.notEqual(replaced[0]!.pid, still.pid, 'another spin is another replica');
      assert.equal(replaced[0]!.layout!.idleSpinMs, 2);
    } finally {
      await client.close();
    }
  });
});
