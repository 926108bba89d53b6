import assert from 'node:assert/strict';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * Actors whose sessions run on an inference thread (TROUPE_INFERENCE_THREAD=always, passed from
 * the agent's environment to its actors) serve the SDK and HTTP with the in-process session's
 * outputs, and still form batches from the calls that arrive while the model is busy; an actor
 * whose inference thread dies fails its calls and is restarted in a new process, as after a crash.
 */

/** The TCP ports process `pid` listens on, from /proc (its sockets' inodes against the netns table). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // The descriptor closed while we looked.
    }
  }
  return readFileSync(`/proc/${pid}/net/tcp`, 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[3] === '0A' && inodes.has(f[9]!))
    .map((f) => parseInt(f[1]!.split(':')[1]!, 16));
}

/**
 * Makes the inference thread of actor process `pid` exit (code 7) when its next run arrives: the
 * inspector is opened in the actor by SIGUSR1 (on a free port: NODE_OPTIONS=--inspect-port=0),
 * found among its listening ports, and asked to evaluate a hook inside the worker thread.
 */
async function exitThreadOnNextRun(pid: number): Promise<() => void> {
  const before = new Set(listeningPorts(pid));
  process.kill(pid, 'SIGUSR1');
  const url = await waitFor(
    'the actor inspector',
    async () => {
      for (const port of listeningPorts(pid).filter((p) => !before.has(p))) {
        const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json().catch(() => undefined)) as
          { webSocketDebuggerUrl: string }[] | undefined;
        if (list?.[0]) return list[0].webSocketDebuggerUrl;
      }
      return undefined;
    },
    10_000,
  );
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  let sessionId: string | undefined;
  let evaluated: ((result: { exceptionDetails?: unknown }) => void) | undefined;
  socket.on('message', (data) => {
    const m = JSON.parse(String(data)) as { method?: string; params?: { sessionId?: string; message?: string } };
    if (m.method === 'NodeWorker.attachedToWorker') sessionId = m.params!.sessionId;
    if (m.method === 'NodeWorker.receivedMessageFromWorker') {
      const inner = JSON.parse(m.params!.message!) as { id?: number; result: { exceptionDetails?: unknown } };
      if (inner.id === 1) evaluated?.(inner.result);
    }
  });
  socket.send(JSON.stringify({ id: 1, method: 'NodeWorker.enable', params: { waitForDebuggerOnStart: false } }));
  const worker = await waitFor('the inference thread to attach', () => sessionId, 10_000);
  const result = new Promise<{ exceptionDetails?: unknown }>((resolve) => (evaluated = resolve));
  const expression = "process.getBuiltinModule('node:worker_threads').parentPort.on('message', () => process.exit(7)), true";
  socket.send(
    JSON.stringify({
      id: 2,
      method: 'NodeWorker.sendMessageToWorker',
      params: { sessionId: worker, message: JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression } }) },
    }),
  );
  assert.equal((await result).exceptionDetails, undefined, 'the hook was set in the inference thread');
  return () => socket.terminate();
}
describe('actors with an inference thread', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    // --inspect-port=0 only says where an inspector opened later (SIGUSR1) listens: a free port.
    cluster = await startCluster({
      agents: [['--name', 'n1', '--cpus', '16']],
      env: { TROUPE_INFERENCE_THREAD: 'always', NODE_OPTIONS: '--inspect-port=0' },
    });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a burst of 64 calls over the SDK forms batches, each caller gets its own rows, and HTTP answers the same', async () => {
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: 8 } });
    const inputs = Array.from({ length: 64 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 2000 + i)));
    const results = await Promise.all(inputs.map((x) => client.run('mlp', { x })));
    const expected = await runInProcess(cluster.models.mlp, {
      x: tensor('float32', [64, 64], Float32Array.from(inputs.flatMap((t) => [...(t.data as Float32Array)]))),
    });
    const all = expected.logits!.data as Float32Array;
    results.forEach((r, i) => {
      const mine = r.logits!.data as Float32Array;
      for (let k = 0; k < 10; k++) {
        const want = all[i * 10 + k]!;
        assert.ok(Math.abs(mine[k]! - want) <= 1e-5 * Math.max(1, Math.abs(want)), `call ${i} logit ${k}: ${mine[k]} vs ${want}`);
      }
    });
    const [actor] = await waitFor(
      'the actor stats to report 64 calls',
      async () => {
        const actors: ActorView[] = (await client.describe()).deployments.find((d) => d.name === 'mlp')?.actors ?? [];
        return actors[0]?.stats?.calls === 64 ? actors : undefined;
      },
      10_000,
    );
    assert.ok(actor!.stats!.batches < 64, `expected batches larger than 1, got ${actor!.stats!.batches} runs for 64 calls`);

    const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: [...(inputs[3]!.data as Float32Array)] }] }),
    });
    assert.equal(answer.status, 200, answer.body.toString());
    const logits = (answer.json as { outputs: { name: string; data: number[] }[] }).outputs.find((o) => o.name === 'logits')!.data;
    logits.forEach((v, k) => assert.ok(Math.abs(v - all[30 + k]!) <= 1e-5 * Math.max(1, Math.abs(all[30 + k]!)), `HTTP logit ${k}`));
  });

  test('the inference thread dying fails the call in it with TROUPE_ERR_ACTOR_DIED and the actor restarts in a new process', async () => {
    const view = await client.deploy({ name: 'fragile', model: 'mlp.onnx', threads: 1 });
    const pid = view.actors[0]!.pid!;
    const x = tensor('float32', [1, 64], seededFloats(64, 7));
    await client.run('fragile', { x });
    const disconnect = await exitThreadOnNextRun(pid);
    try {
      // The call reaches the thread, which exits: the actor fails it and exits (code 6). The head
      // may retry it on the restarted replica (inference is idempotent), or answer the failure.
      const outcome = await client.run('fragile', { x }).then(
        (out) => out.logits!.shape,
        (err: unknown) => (err instanceof TroupeError ? err.code : String(err)),
      );
      assert.ok(
        outcome === 'TROUPE_ERR_ACTOR_DIED' || (Array.isArray(outcome) && outcome[0] === 1),
        `the call got ${JSON.stringify(outcome)}`,
      );
    } finally {
      disconnect();
    }
    const back = await waitFor(
      'the replica READY in a new process',
      async () => {
        const a = (await client.describe()).deployments.find((d) => d.name === 'fragile')?.actors[0];
        return a && a.state === 'READY' && a.restarts >= 1 && a.pid !== pid ? a : undefined;
      },
      30_000,
    );
    assert.equal(back.restarts, 1);
    assert.deepEqual((await client.run('fragile', { x })).logits!.shape, [1, 10]);
  });
});
