import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startHead } from '../../head/index.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import { StreamReader } from '../helpers/status-stream.js';
import type { TestCluster } from '../helpers/cluster.js';
import { seededFloats } from '../helpers/tensors.js';

describe('status stream: the live feed of the status page', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let stream: StreamReader;

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--simulate-gpus', '1', '--cpus', '4']] });
    client = await connect(cluster.url);
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', gpus: 0.5, threads: 1, batch: { maxSize: 4, maxDelayMs: 2 } });
    // The head samples once a second from its start; a deploy can be READY before the first one.
    // A throwaway stream shows when it has, so the first snapshot under test has history to carry.
    const probe = new StreamReader(cluster.url);
    await probe.until('the head to take its first sample', (s) => s.series.times.length > 0);
    probe.close();
    stream = new StreamReader(cluster.url);
  });
  after(async () => {
    stream?.close();
    await client?.close();
    await cluster?.stop();
  });

  test('the first snapshot is the whole picture: nodes, GPU holders, actors, events, history', async () => {
    const first = await stream.next();
    assert.equal(first.full, true);
    assert.equal(first.historySeconds, 600);
    const [node] = first.nodes;
    assert.equal(node?.name, 'n1');
    assert.equal(node.state, 'ALIVE');
    assert.equal(node.cpus, 4);
    assert.equal(node.cpusAllocated, 1);
    assert.equal(node.gpus.length, 1);
    const gpu = node.gpus[0]!;
    assert.equal(gpu.simulated, true);
    assert.equal(gpu.memoryUsedMiB, null, 'a simulated GPU has no measured memory');
    assert.deepEqual(
      gpu.holders.map((h) => [h.actor, h.share, h.state]),
      [['mlp#0', 0.5, 'READY']],
    );
    assert.equal(gpu.allocated, 0.5);
    const actor = first.actors.find((a) => a.name === 'mlp#0');
    assert.equal(actor?.state, 'READY');
    assert.ok(actor.pid);
    assert.equal(actor.lastError, null);
    assert.deepEqual(
      first.deployments.map((d) => [d.name, d.state, d.replicas, d.states]),
      [['mlp', 'READY', 1, { READY: 1 }]],
    );
    assert.equal(first.summary.nodes.ALIVE, 1);
    assert.equal(first.summary.actors.READY, 1);
    assert.deepEqual(first.summary.gpus, { total: 1, simulated: 1, allocated: 0.5 });
    assert.deepEqual(first.summary.cpus, { total: 4, allocated: 1 });
    const kinds = first.events.map((e) => e.kind);
    assert.ok(kinds.includes('node-joined') && kinds.includes('deployment-changed') && kinds.includes('actor-ready'), kinds.join(', '));
    const seqs = first.events.map((e) => e.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'events oldest first, numbered',
    );
    assert.equal(first.series.times.length > 0, true, 'the head has sampled since it started');
  });

  test('later snapshots carry only new samples and events; requests/s, latency and batch size follow traffic', async () => {
    const known = await stream.next();
    assert.equal(known.full, false);
    const x = tensor('float32', [1, 64], seededFloats(64, 1));
    for (let round = 0; round < 10; round++) await Promise.all(Array.from({ length: 8 }, () => client.run('mlp', { x })));
    // Calls finish in one sample; the actors' batch counters, and the calls the client sent them
    // directly, arrive with their next report (about once a second).
    const seen = { rps: false, p50: false, batch: false };
    const last = await stream.until('requests/s, p50, a batch size and all 80 calls counted for mlp', (s) => {
      assert.equal(s.full, false);
      assert.ok(s.series.times.length <= 2, `${s.series.times.length} samples in one update: only new ones are sent`);
      for (const column of Object.values(s.series.values)) assert.equal(column.length, s.series.times.length);
      seen.rps ||= s.series.values['rps|mlp']?.some((v) => v !== null && v > 0) ?? false;
      seen.p50 ||= s.series.values['p50|mlp']?.some((v) => v !== null && v > 0) ?? false;
      seen.batch ||= s.series.values['batch|mlp']?.some((v) => v !== null && v >= 1) ?? false;
      return seen.rps && seen.p50 && seen.batch && s.deployments[0]?.ok === 80 ? s : undefined;
    });
    const mlp = last.deployments[0]!;
    assert.equal(mlp.ok, 80);
    assert.ok(mlp.p50Ms !== null && mlp.p99Ms !== null && mlp.p99Ms >= mlp.p50Ms);
    assert.ok(mlp.meanBatch !== null && mlp.meanBatch >= 1);
    assert.ok('util|n1/gpu0' in last.series.values, 'a series for the simulated GPU');
  });

  test('a killed actor shows as crashed, then READY again with its last error', async () => {
    const pid = (await stream.next()).actors.find((a) => a.name === 'mlp#0')!.pid!;
    process.kill(pid, 'SIGKILL');
    const crashed = await stream.until('the crash event', (s) => s.events.find((e) => e.kind === 'actor-crashed'));
    assert.match(crashed.message, /^mlp#0 .*SIGKILL/);
    const back = await stream.until(
      'mlp#0 READY with a new pid',
      (s) => {
        const a = s.actors.find((x) => x.name === 'mlp#0');
        return a?.state === 'READY' && a.pid !== pid ? a : undefined;
      },
      30_000,
    );
    assert.equal(back.restarts, 1);
    assert.match(back.lastError?.message ?? '', /SIGKILL/);
  });
});

describe('status stream: lifecycle', { timeout: 60_000 }, () => {
  test('an open stream does not hold up the head closing', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'troupe-head-data-'));
    const head = await startHead({ port: 0, dataDir });
    const stream = new StreamReader(head.url);
    try {
      assert.equal((await stream.next()).full, true);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        head.close(),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('head.close() waited on the open stream')), 10_000))),
      ]).finally(() => clearTimeout(timer));
      // An update the head wrote before it closed may still be on its way; then the stream ends.
      await assert.rejects(async () => {
        for (let i = 0; i < 10; i++) await stream.next(5000);
      }, /stream ended|terminated|no update/);
    } finally {
      stream.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
