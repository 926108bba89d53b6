import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Fleet } from '../../bench/scale/fleet.js';
import { RouteWatcher } from '../../bench/scale/probes.js';
import { connect } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';

// The control plane at a small scale (issue 27), for correctness, not speed: a real head, 200
// simulated nodes of 8 GPUs speaking the agent protocol over real sockets (bench/scale/), 2,000
// actors through the SDK. Half the deployments take whole GPUs and half share them (0.5 each),
// 1,500 of the 1,600 GPUs in all, so a scheduler that over-commits a device shows it.
const NODES = 200;
const GPUS = 8;
const DEPLOYMENTS = 20;
const REPLICAS = 100;
const TOTAL = DEPLOYMENTS * REPLICAS;
const shareOf = (deployment: string) => (Number(deployment.split('-')[1]) % 2 === 0 ? 1 : 0.5);
const names = Array.from({ length: DEPLOYMENTS }, (_, i) => `small-${i}`);

async function allActors(client: Cluster): Promise<ActorView[]> {
  return (await client.describe()).deployments.flatMap((d) => d.actors);
}

/** Every live actor's GPU shares summed per `node/gpu`, from the head's own view. */
function gpuLoad(actors: ActorView[]): Map<string, number> {
  const load = new Map<string, number>();
  for (const a of actors) {
    if (a.state === 'DEAD' || a.state === 'PENDING') continue;
    for (const g of a.gpus) load.set(`${a.node}/${g}`, (load.get(`${a.node}/${g}`) ?? 0) + shareOf(a.deployment));
  }
  return load;
}

describe(
  `${NODES} simulated nodes, ${TOTAL} actors: placed once, never over-committed, routes converge, the dead replaced`,
  { timeout: 240_000 },
  () => {
    let cluster: TestCluster;
    let fleet: Fleet;
    let client: Cluster;
    const watchers: RouteWatcher[] = [];
    /** Each start order's GPU shares, summed per `node/gpu` as the orders arrive: a device over 1 is over-committed. */
    const ordered = new Map<string, number>();
    const overCommitted: string[] = [];

    before(async () => {
      // Short liveness bounds: the node killed below is found dead in a second and a half, not ten.
      // Errors only: at the end the head says, for each of the 200 nodes, that its connection closed.
      cluster = await startCluster({
        agents: [],
        headArgs: ['--http-workers', '0', '--suspect-after-ms', '500', '--dead-after-ms', '1500'],
        env: { TROUPE_LOG_LEVEL: process.env.TROUPE_TEST_LOG_LEVEL ?? 'error' },
      });
      fleet = await Fleet.start({ headUrl: cluster.url, nodes: NODES, gpusPerNode: GPUS, heartbeatMs: 250 });
      fleet.onOrder = (order, node) => {
        for (const g of order.gpus) {
          const key = `${node.name}/${g}`;
          const load = (ordered.get(key) ?? 0) + shareOf(order.deployment ?? '');
          ordered.set(key, load);
          if (load > 1 + 1e-9) overCommitted.push(`${key} at ${load} after ${order.actorId}`);
        }
      };
      client = await connect(cluster.url);
      // SDK clients holding the routes of a whole-GPU and a shared-GPU deployment, from before the deploy.
      for (const name of names.slice(0, 2)) watchers.push(await RouteWatcher.open(cluster.url, name));
    });
    after(async () => {
      for (const w of watchers) w.close();
      await client?.close();
      await cluster?.stop();
      fleet?.close();
    });

    /** Waits until each watching client's routes list exactly the READY replicas the head shows. */
    async function routesConverge(): Promise<void> {
      for (const w of watchers) {
        const name = w.routes?.deployment;
        await waitFor(
          `the routes of ${name} to list its READY replicas`,
          async () => {
            const ready = (await allActors(client)).filter((a) => a.deployment === name && a.state === 'READY').map((a) => a.id);
            const routed = (w.routes?.replicas ?? []).map((r) => r.actor);
            return ready.length === REPLICAS && JSON.stringify(routed.sort()) === JSON.stringify(ready.sort());
          },
          30_000,
          100,
        );
      }
    }

    test('every actor is placed once and READY, no GPU holds more than it has', async () => {
      await Promise.all(
        names.map((name) =>
          client.deploy({ name, model: 'sim.onnx', replicas: REPLICAS, gpus: shareOf(name), cpus: 1 }, { timeoutMs: 180_000 }),
        ),
      );
      const actors = await allActors(client);
      assert.equal(actors.length, TOTAL);
      assert.deepEqual(
        actors.filter((a) => a.state !== 'READY').map((a) => `${a.name} ${a.state}`),
        [],
      );
      assert.equal(new Set(actors.map((a) => a.id)).size, TOTAL);
      // One start order per actor, each to the node the head shows it on, with the GPUs it shows.
      assert.equal(fleet.orders.size, TOTAL);
      assert.deepEqual(
        [...fleet.orders.values()].filter((n) => n !== 1),
        [],
      );
      for (const a of actors) assert.equal(fleet.times.get(a.id)?.node, a.node, `${a.name} runs where the head says`);
      assert.deepEqual(overCommitted, []);
      assert.ok(
        [...gpuLoad(actors).values()].every((load) => load <= 1 + 1e-9),
        'no GPU over-committed in the head view',
      );
      // Spread: 100 replicas over 200 nodes never share a node.
      for (const name of names) {
        const nodes = actors.filter((a) => a.deployment === name).map((a) => a.node);
        assert.equal(new Set(nodes).size, REPLICAS, `${name} spread over ${REPLICAS} nodes`);
      }
      await routesConverge();
    });

    test('a killed actor is started again, once', async () => {
      const node = fleet.nodes.find((n) => !n.dead && n.actors.size > 0)!;
      const [id] = [...node.actors.keys()] as [string];
      const a = (await allActors(client)).find((x) => x.id === id)!;
      const before = fleet.orders.get(id)!;
      // Its GPU share is free again on that node once it is gone: the restart may land there.
      for (const g of a.gpus) ordered.set(`${node.name}/${g}`, (ordered.get(`${node.name}/${g}`) ?? 0) - shareOf(a.deployment));
      node.killActor(id);
      await waitFor(
        `${a.name} READY again`,
        async () => fleet.orders.get(id) === before + 1 && (await allActors(client)).every((x) => x.state === 'READY'),
        30_000,
        100,
      );
      assert.deepEqual(overCommitted, []);
      await routesConverge();
    });

    test("a killed node's actors are replaced elsewhere, placed once more each, and routes converge again", async () => {
      const victim = fleet.nodes.find((n) => n.actors.size > 0)!;
      const lost = new Set(victim.actors.keys());
      const ordersBefore = new Map([...fleet.orders]);
      victim.kill();
      for (const key of [...ordered.keys()]) if (key.startsWith(`${victim.name}/`)) ordered.delete(key);
      await waitFor(
        `the ${lost.size} actors of ${victim.name} READY elsewhere`,
        async () => {
          const actors = await allActors(client);
          return actors.length === TOTAL && actors.every((a) => a.state === 'READY' && a.node !== victim.name);
        },
        60_000,
        100,
      );
      const view = await client.describe();
      assert.equal(view.nodes.find((n) => n.name === victim.name)?.state, 'DEAD');
      for (const id of lost) assert.equal(fleet.orders.get(id), ordersBefore.get(id)! + 1, `${id} started once more, on another node`);
      const sum = (orders: Map<string, number>) => [...orders.values()].reduce((n, c) => n + c, 0);
      assert.equal(sum(fleet.orders), sum(ordersBefore) + lost.size);
      assert.deepEqual(overCommitted, []);
      assert.ok([...gpuLoad(view.deployments.flatMap((d) => d.actors)).values()].every((load) => load <= 1 + 1e-9));
      await routesConverge();
    });
  },
);
