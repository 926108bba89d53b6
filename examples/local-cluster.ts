/**
 * A throwaway cluster for the examples: a head and one agent as child processes on loopback
 * (port 0), models in a temporary directory, fn modules from the compiled tree. Set TROUPE_HEAD
 * to run an example against a cluster you started yourself instead; its agents then need the
 * example's models in their --model-dir (the example writes them into TROUPE_MODEL_DIR).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChild, stopChild } from '../cli/children.js';
import type { Child } from '../cli/children.js';
import { connect } from '../runtime/index.js';
import type { Cluster } from '../runtime/index.js';

/** The compiled tree (dist/), where fn modules such as examples/ensemble/steps.js live. */
export const DIST_ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface LocalCluster {
  client: Cluster;
  url: string;
  /** Where the agent reads models from: write the example's models here. */
  modelDir: string;
  stop(): Promise<void>;
}

export interface LocalClusterOptions {
  /** Simulated GPUs for the agent (`--simulate-gpus`). */
  simulateGpus?: number;
  /** CPUs the agent offers; examples deploy several small actors, each reserving a CPU. */
  cpus?: number;
}

export async function startLocalCluster(options: LocalClusterOptions = {}): Promise<LocalCluster> {
  if (process.env.TROUPE_HEAD) {
    const modelDir = process.env.TROUPE_MODEL_DIR ?? process.cwd();
    const client = await connect(process.env.TROUPE_HEAD);
    return { client, url: process.env.TROUPE_HEAD, modelDir, stop: () => client.close() };
  }
  const modelDir = await mkdtemp(join(tmpdir(), 'troupe-example-'));
  const env = { ...process.env, TROUPE_LOG_LEVEL: process.env.TROUPE_LOG_LEVEL ?? 'warn' };
  const children: Child[] = [];
  const stop = async () => {
    for (const child of children.slice().reverse()) await stopChild(child, 10_000);
    await rm(modelDir, { recursive: true, force: true });
  };
  try {
    const head = startChild(['head', '--port', '0', '--data-dir', join(modelDir, '.head')], /listening on (\S+)/, 30_000, env);
    children.push(head);
    const url = await head.line;
    // Its own --state-dir, so two examples at once never take each other's actors for orphans.
    const args = [
      'agent',
      '--head',
      url,
      '--name',
      'local',
      '--model-dir',
      modelDir,
      '--module-dir',
      DIST_ROOT,
      '--cpus',
      String(options.cpus ?? 32),
      '--state-dir',
      join(modelDir, '.agent'),
    ];
    if (options.simulateGpus) args.push('--simulate-gpus', String(options.simulateGpus));
    const agent = startChild(args, /joined/, 30_000, env);
    children.push(agent);
    await agent.line;
    const client = await connect(url);
    return {
      client,
      url,
      modelDir,
      stop: async () => {
        await client.close();
        await stop();
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Runs an example's main with a local cluster, printing a TroupeError's code on failure. */
export async function runExample(options: LocalClusterOptions, main: (cluster: LocalCluster) => Promise<void>): Promise<void> {
  // An actor process that imports an entry point (`troupe up` offers the compiled examples' folder
  // to fn steps and class actors) must not start a cluster of its own: its load fails instead.
  if (process.env.TROUPE_ACTOR_ID !== undefined)
    throw new Error("this module is an example's entry point (it starts a cluster of its own), not a module of steps or classes");
  const cluster = await startLocalCluster(options);
  try {
    await main(cluster);
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'ERROR';
    process.stderr.write(`example failed: ${code}: ${(err as Error).message}\n`);
    process.exitCode = 1;
  } finally {
    await cluster.stop();
  }
}
