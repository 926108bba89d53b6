import { readFile } from 'node:fs/promises';
import { RoutesSchema, connect, tensor } from '../../runtime/internal.js';
import type { Cluster, Routes, Tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from './cluster.js';
import type { TestCluster } from './cluster.js';
import { RawSocket, pack } from './fuzz.js';
import { seededFloats } from './tensors.js';
import { DIST_ROOT } from './graphs.js';

export const CHAOS_TOKEN = 'fuzz-token-0123456789';
export const CHAOS_AUTH = { authorization: `Bearer ${CHAOS_TOKEN}` };
/** The PRNG seed of the seeded chaos tests: TROUPE_TEST_FUZZ_SEED replays a run. */
export const FUZZ_SEED = Number(process.env.TROUPE_TEST_FUZZ_SEED ?? 20240611);

/** Resident memory of a process, from /proc (bytes). */
export async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

export interface ChaosCluster {
  cluster: TestCluster;
  client: Cluster;
  /** The processes that must all survive: same pids at the end. */
  pids: { head: number; agent: number; actor: number; classActor: number };
  wsBase: string;
  /** A valid input for the deployed MLP. */
  x(): { x: Tensor };
  /** The routes the head hands an admitted client for `deployment`. */
  routesOf(deployment: string): Promise<Routes>;
  stop(): Promise<void>;
}

/**
 * A token-guarded cluster with tight frame and body bounds, one MLP and one class actor
 * (test/fixtures/hostile.ts, as 'hostile') deployed, for bad input.
 */
export async function startChaosCluster(): Promise<ChaosCluster> {
  const cluster = await startCluster({
    headArgs: ['--token', CHAOS_TOKEN, '--max-frame-mib', '1', '--max-body-mib', '1'],
    agents: [['--token', CHAOS_TOKEN, '--name', 'n1', '--cpus', '4', '--module-dir', DIST_ROOT]],
  });
  const wsBase = cluster.url.replace('http', 'ws');
  const client = await connect(cluster.url, { token: CHAOS_TOKEN });
  const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
  const hostile = await client.deploy({ name: 'hostile', kind: 'class', model: 'test/fixtures/hostile.js#Hostile', cpus: 0.1 });
  return {
    cluster,
    client,
    pids: {
      head: cluster.head.process.pid!,
      agent: cluster.agents[0]!.process.pid!,
      actor: view.actors[0]!.pid!,
      classActor: hostile.actors[0]!.pid!,
    },
    wsBase,
    x: () => ({ x: tensor('float32', [1, 64], seededFloats(64, 1)) }),
    async routesOf(deployment) {
      const raw = new RawSocket(`${wsBase}/v1/client`, CHAOS_AUTH, ['reply']);
      await raw.opened;
      raw.send(pack([{ type: 'routes', id: 'routes-1', deployment }]), true);
      const answer = await waitFor('the routes', () => raw.received.find((m) => (m as { id?: string }).id === 'routes-1'), 10_000);
      raw.close();
      return RoutesSchema.parse((answer as { value: unknown }).value);
    },
    async stop() {
      await client.close();
      await cluster.stop();
    },
  };
}
