import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startChild, stopChild } from '../../cli/children.js';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { childEnv } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/cluster.js';
import { Fleet } from './fleet.js';
import { placementQuantiles } from './head-metrics.js';
import type { ScaleOptions } from './options.js';
import { RouteWatcher, StatusStreamMeter, statusFirstLoadBytes, watchHead } from './probes.js';
import { statusFirstPaintMs } from './status-paint.js';

/** The figures `--json` prints, named as issue 27 asks; the extra ones say how each was taken. */
export interface ScaleFigures {
  nodes: number;
  actors: number;
  deployToReadyMs: number;
  placementP50Ms: number | null;
  placementP99Ms: number | null;
  headRssMb: number;
  headIdleCpuPct: number;
  replaceReadyMs: number | null;
  clientBytesPerS: number;
  statusFirstLoadBytes: number | null;
  statusBytesPerS: number | null;
  /** Why the status page's figures are missing (e.g. the head dropped the stream), or null. */
  statusError: string | null;
  /** From navigating Chromium (playwright-core) to the page to its summary, first node card and first actor row shown. */
  statusFirstPaintMs: number | null;
  /** The head's CPU (% of one core) while one page reads the status feed, the cluster otherwise idle: what a viewer costs, with headIdleCpuPct. */
  headStatusCpuPct: number;
  /** Bytes/s of the status feed to one page while a node dies and its actors are replaced (null without --kill). */
  statusChurnBytesPerS: number | null;
  /** How actors reached the head: relayed by their node's agent, or a connection each. */
  actorLinks: 'relay' | 'direct';
  joinMs: number;
  placements: number;
  headDeployPeakRssMb: number;
  headDeployCpuPct: number;
  deathDetectedMs: number | null;
  clientBytes: number;
  /** The killed node held a replica of the watched client's deployment, so its routes changed too. */
  watchedChanged: boolean;
  clientWindowS: number;
}

const DEPLOY_TIMEOUT_MS = 30 * 60_000;

async function readyActors(client: Cluster): Promise<number> {
  const view = await client.describe();
  return view.deployments.reduce((n, d) => n + d.actors.filter((a) => a.state === 'READY').length, 0);
}

/**
 * One run: a real head (its own process, as `troupe head` starts it), `nodes` simulated nodes in
 * this process, D deployments of R replicas of one GPU each through the SDK; then the head idle,
 * the status page's load, and one node's death. `say` gets progress lines.
 */
export async function runScale(options: ScaleOptions, say: (line: string) => void): Promise<ScaleFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-scale-'));
  const total = options.deployments * options.replicas;
  // Every agent and actor holds one connection; the head's default cap (10,000) is for real clusters.
  const maxConnections = String(options.nodes + total + 1000);
  // The profiling hook reads TROUPE_PROFILE_DIR in this process when it starts a child (test/helpers/env.js removed any inherited one).
  if (options.headCpuProf) process.env.TROUPE_PROFILE_DIR = resolve(options.headCpuProf);
  const head = startChild(
    ['head', '--port', '0', '--data-dir', join(dir, 'head'), '--http-workers', '0', '--max-connections', maxConnections],
    /listening on (\S+)/,
    30_000,
    childEnv(),
  );
  delete process.env.TROUPE_PROFILE_DIR;
  let fleet: Fleet | undefined;
  let client: Cluster | undefined;
  let watcher: RouteWatcher | undefined;
  try {
    const url = await head.line;
    const pid = head.process.pid!;
    const t0 = performance.now();
    fleet = await Fleet.start({
      headUrl: url,
      nodes: options.nodes,
      gpusPerNode: options.gpusPerNode,
      heartbeatMs: options.heartbeatMs,
      actorStatsMs: options.actorStatsMs,
      actorLinks: options.actorLinks,
    });
    const joinMs = performance.now() - t0;
    say(`${options.nodes} nodes joined in ${Math.round(joinMs)} ms`);

    client = await connect(url);
    const names = Array.from({ length: options.deployments }, (_, i) => `scale-${i}`);
    // The client whose bytes are counted holds the routes of the first deployment only.
    watcher = await RouteWatcher.open(url, names[0]!);
    const c = client;
    const deploy = await watchHead(pid, async () => {
      const started = performance.now();
      await Promise.all(
        names.map((name) =>
          c.deploy({ name, model: 'sim.onnx', replicas: options.replicas, gpus: 1, cpus: 1 }, { timeoutMs: DEPLOY_TIMEOUT_MS }),
        ),
      );
      return performance.now() - started;
    });
    const actors = await readyActors(c);
    const placement = await placementQuantiles(url);
    say(`${actors} actors READY in ${Math.round(deploy.result)} ms; placement p50 ${placement.p50Ms} ms, p99 ${placement.p99Ms} ms`);

    // Idle: heartbeats and actor stats only, nobody watching the status page; after as long
    // again to settle, as the head is still writing the deploy's last state to disk at first.
    await new Promise((resolve) => setTimeout(resolve, options.idleS * 1000));
    const idle = await watchHead(pid, () => new Promise((resolve) => setTimeout(resolve, options.idleS * 1000)));
    say(`idle head: ${Math.round(idle.peakRssMb)} MB RSS, ${idle.cpuPct.toFixed(1)}% of a core`);

    const watched = await watchHead(pid, () => measureStatusPage(url, options.idleS));
    const status = watched.result;
    say(`status page: first load ${status.firstLoad} bytes, then ${status.bytesPerS} bytes/s${status.error ? ` (${status.error})` : ''}`);
    const paint = await statusFirstPaintMs(url);
    say(`status page: first paint in Chromium ${paint.ms} ms${paint.error ? ` (${paint.error})` : ''}`);

    const clientFrom = { bytes: watcher.bytes, at: performance.now() };
    let replaceReadyMs: number | null = null;
    let deathDetectedMs: number | null = null;
    let watchedChanged = false;
    let statusChurnBytesPerS: number | null = null;
    if (options.kill) {
      // One page watches the death too: its feed carries the changes, not the cluster.
      const churn = new StatusStreamMeter(url);
      await churn.firstEvent.catch(() => 0);
      const from = { bytes: churn.bytes, at: performance.now() };
      ({ replaceReadyMs, deathDetectedMs, watchedChanged } = await killOneNode(fleet, c, names[0]!, total));
      statusChurnBytesPerS = churn.ended ? null : Math.round((churn.bytes - from.bytes) / ((performance.now() - from.at) / 1000));
      churn.close();
      say(
        `node death detected after ${deathDetectedMs} ms; replacements READY ${replaceReadyMs} ms later; status feed ${statusChurnBytesPerS} bytes/s meanwhile`,
      );
    }
    const clientWindowS = (performance.now() - clientFrom.at) / 1000;
    const clientBytes = watcher.bytes - clientFrom.bytes;
    return {
      nodes: options.nodes,
      actors,
      deployToReadyMs: Math.round(deploy.result),
      placementP50Ms: placement.p50Ms,
      placementP99Ms: placement.p99Ms,
      headRssMb: Math.round(idle.peakRssMb),
      headIdleCpuPct: Number(idle.cpuPct.toFixed(1)),
      replaceReadyMs,
      clientBytesPerS: Math.round(clientBytes / clientWindowS),
      statusFirstLoadBytes: status.firstLoad,
      statusBytesPerS: status.bytesPerS,
      statusError: status.error ?? paint.error,
      statusFirstPaintMs: paint.ms,
      headStatusCpuPct: Number(watched.cpuPct.toFixed(1)),
      statusChurnBytesPerS,
      actorLinks: options.actorLinks,
      joinMs: Math.round(joinMs),
      placements: placement.placements,
      headDeployPeakRssMb: Math.round(deploy.peakRssMb),
      headDeployCpuPct: Number(deploy.cpuPct.toFixed(1)),
      deathDetectedMs,
      clientBytes,
      watchedChanged,
      clientWindowS: Number(clientWindowS.toFixed(1)),
    };
  } finally {
    watcher?.close();
    await client?.close();
    // The head goes first: nodes that left one by one would have it reschedule every actor for nothing.
    await stopChild(head, 30_000);
    fleet?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Kills a node that holds actors of other deployments only (so the watched client's deployment
 * does not change); times from the kill to the first replacement order (the head found it dead
 * and placed its actors elsewhere), and from there to every actor READY again.
 */
async function killOneNode(
  fleet: Fleet,
  client: Cluster,
  watched: string,
  total: number,
): Promise<{ replaceReadyMs: number; deathDetectedMs: number; watchedChanged: boolean }> {
  const watchedIds = new Set((await client.describe()).deployments.find((d) => d.name === watched)?.actors.map((a) => a.id) ?? []);
  const holding = fleet.nodes.filter((n) => !n.dead && n.actors.size > 0);
  // With replicas on every node (spread, R >= N) none is free of it: then its routes change too.
  const outside = holding.find((n) => ![...n.actors.keys()].some((id) => watchedIds.has(id)));
  const victim = outside ?? holding[0];
  if (!victim) throw new Error('no simulated node holds an actor');
  const lost = victim.actors.size;
  const killedAt = performance.now();
  victim.kill();
  // Replacements are new start orders to other nodes after the kill; every one READY ends the wait.
  const replacements = () => [...fleet.times.values()].filter((t) => t.orderedAt > killedAt);
  await waitFor(`${lost} replacement start orders`, () => replacements().length >= lost, 120_000, 20);
  const firstOrder = Math.min(...replacements().map((t) => t.orderedAt));
  await waitFor('every replacement to say ready', () => replacements().every((t) => t.readyAt !== undefined), 60_000, 5);
  await waitFor('the head to count every actor READY', async () => (await readyActors(client)) >= total, 60_000, 20);
  return {
    deathDetectedMs: Math.round(firstOrder - killedAt),
    replaceReadyMs: Math.round(performance.now() - firstOrder),
    watchedChanged: outside === undefined,
  };
}

/** The status page's first load and its live feed's bytes per second over `seconds`; a failure is a figure too. */
async function measureStatusPage(
  url: string,
  seconds: number,
): Promise<{ firstLoad: number | null; bytesPerS: number | null; error: string | null }> {
  const stream = new StatusStreamMeter(url);
  try {
    const firstLoad = await statusFirstLoadBytes(url, stream);
    const start = { bytes: stream.bytes, at: performance.now() };
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    if (stream.ended) return { firstLoad, bytesPerS: null, error: `the head ended the status stream after ${stream.bytes} bytes` };
    return { firstLoad, bytesPerS: Math.round((stream.bytes - start.bytes) / ((performance.now() - start.at) / 1000)), error: null };
  } catch (err) {
    return { firstLoad: null, bytesPerS: null, error: `${(err as Error).message} (after ${stream.bytes} bytes of the stream)` };
  } finally {
    stream.close();
  }
}
