import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { tensor } from '../../runtime/internal.js';
import { handoffAddon } from '../../runtime/handoff/addon.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call, nodeCall } from '../helpers/http.js';
import type { NodeAnswer } from '../helpers/http.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { assertClose, floatsOf, mlpBinaryRequest } from '../helpers/mlp-oip.js';

const skip = typeof handoffAddon() === 'string' ? `the handoff addon is not built: ${handoffAddon() as string}` : false;

/** Requests over one kept-alive connection, and how many connections they took. */
function connection(base: string) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const opened = { count: 0 };
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (...args: Parameters<typeof create>) => {
    opened.count++;
    return create(...args);
  };
  const send = (method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<NodeAnswer> =>
    nodeCall(base, method, path, { ...(body === undefined ? {} : { body }), headers, agent });
  return { send, opened, close: () => agent.destroy() };
}

/** A counter's series from the head's /metrics, by its label text (e.g. `model="mlp"`), summed. */
async function counter(url: string, name: string, labels: string): Promise<number> {
  const text = (await call(url, 'GET', '/metrics')).body.toString();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && l.includes(labels))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

describe('handoff: replicas on the head host serve their HTTP connections themselves', { timeout: 170_000, skip }, () => {
  let cluster: TestCluster;
  let want: Float32Array;
  const x = seededFloats(3 * 64, 5);

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-handoff', '--http-workers', '1'] });
    for (const [name, model, replicas] of [
      ['mlp', 'mlp.onnx', 2],
      ['other', 'mlp.onnx', 1],
    ] as const) {
      const put = await call(cluster.url, 'PUT', `/api/v1/deployments/${name}`, {
        body: JSON.stringify({ model, replicas, cpus: 0.25, threads: 1, batch: { maxSize: 8 } }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(put.status, 201, put.body.toString());
    }
    want = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [3, 64], x) })).logits!.data as Float32Array;
  });
  after(async () => {
    await cluster?.stop();
  });

  test('inference connections go to the replicas, by connection, and answer with onnxruntime numbers', async () => {
    const workerServed = await counter(cluster.url, 'troupe_front_door_requests_total', 'model="mlp"');
    const handedBefore = await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"');
    const { body, headers } = mlpBinaryRequest(x, 3);
    const clients = [0, 1, 2, 3].map(() => connection(cluster.url));
    try {
      // A replica's door opens just after it is READY: the first connections may still go to the workers.
      let probes = 0;
      await waitFor(
        'a connection handed to a replica',
        async () => {
          probes++;
          const probe = connection(cluster.url);
          try {
            assert.equal((await probe.send('POST', '/v2/models/mlp/infer', body, headers)).status, 200);
          } finally {
            probe.close();
          }
          return (await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"')) > handedBefore;
        },
        30_000,
        200,
      );
      const handed = await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"');
      const perReplica = async () =>
        Promise.all(['mlp#0', 'mlp#1'].map((a) => counter(cluster.url, 'troupe_http_handoffs_total', `actor="${a}"`)));
      const [zeroBefore, oneBefore] = await perReplica();
      for (let round = 0; round < 5; round++) {
        const answers = await Promise.all(clients.map((c) => c.send('POST', '/v2/models/mlp/infer', body, headers)));
        for (const answer of answers) {
          assert.equal(answer.status, 200, answer.body.toString());
          assertClose(floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))), want, 'binary answer');
        }
      }
      for (const c of clients) assert.equal(c.opened.count, 1, 'each client kept its one connection');
      // Four connections, handed once each, to both replicas (fewest connections first).
      assert.equal(await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"'), handed + 4);
      const [zero, one] = await perReplica();
      assert.ok(
        zero! > zeroBefore! && one! > oneBefore!,
        `both replicas took connections (mlp#0 ${zero! - zeroBefore!}, mlp#1 ${one! - oneBefore!})`,
      );
      // The 20 requests reached no worker: at most the probes sent before a door opened did.
      assert.ok(
        (await counter(cluster.url, 'troupe_front_door_requests_total', 'model="mlp"')) <= workerServed + probes,
        'requests on handed connections reached a worker',
      );
    } finally {
      for (const c of clients) c.close();
    }
  });

  test('on a handed connection, protocol reads are relayed, and another model or route goes back to the head', async () => {
    const c = connection(cluster.url);
    const { body, headers } = mlpBinaryRequest(x, 3);
    try {
      const handed = await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"');
      assert.equal((await c.send('POST', '/v2/models/mlp/infer', body, headers)).status, 200);
      assert.equal(await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"'), handed + 1);
      const meta = await c.send('GET', '/v2/models/mlp');
      assert.equal(meta.status, 200, meta.body.toString());
      assert.equal((JSON.parse(meta.body.toString()) as { name: string }).name, 'mlp');
      const bad = await c.send(
        'POST',
        '/v2/models/mlp/infer',
        JSON.stringify({ inputs: [{ name: 'x', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] }] }),
        { 'content-type': 'application/json' },
      );
      assert.equal(bad.status, 400);
      assert.match(bad.body.toString(), /TROUPE_ERR_BAD_INPUT/);
      // Another deployment's inference: the replica gives the connection back and the head answers.
      const other = await c.send('POST', '/v2/models/other/infer', body, headers);
      assert.equal(other.status, 200, other.body.toString());
      assertClose(
        floatsOf(other.body.subarray(Number(other.headers['inference-header-content-length']))),
        want,
        'the other model, through the head',
      );
      const list = await c.send('GET', '/api/v1/deployments');
      assert.equal(list.status, 200);
      assert.equal(c.opened.count, 1, 'all on one connection');
    } finally {
      c.close();
    }
  });

  test("a replica's end closes its connections; new ones go to the replica left", async () => {
    const { body, headers } = mlpBinaryRequest(x, 3);
    const c = connection(cluster.url);
    try {
      assert.equal((await c.send('POST', '/v2/models/mlp/infer', body, headers)).status, 200);
      const scaled = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
        body: JSON.stringify({ model: 'mlp.onnx', replicas: 1, cpus: 0.25, threads: 1, batch: { maxSize: 8 } }),
        headers: { 'content-type': 'application/json' },
      });
      assert.ok(scaled.status === 200 || scaled.status === 201, scaled.body.toString());
      await waitFor(
        'one mlp replica',
        async () => {
          const view = (await call(cluster.url, 'GET', '/api/v1/deployments/mlp')).json as { actors: unknown[] };
          return view.actors.length === 1;
        },
        30_000,
      );
      // Whichever replica held it, the client's next request finds a working connection (its old one, or a new one).
      for (let i = 0; i < 10; i++) {
        const fresh = connection(cluster.url);
        try {
          const answer = await fresh.send('POST', '/v2/models/mlp/infer', body, headers);
          assert.equal(answer.status, 200, answer.body.toString());
        } finally {
          fresh.close();
        }
      }
    } finally {
      c.close();
    }
  });
});
