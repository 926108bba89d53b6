import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import type { Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call } from '../helpers/http.js';
import { RawStream } from '../helpers/raw-stream.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
type Actor = { name: string; state: string; reason: string | null };

const clusters: TestCluster[] = [];
async function cluster(options: Parameters<typeof startCluster>[0]): Promise<TestCluster> {
  const c = await startCluster(options);
  clusters.push(c);
  return c;
}
after(async () => {
  await Promise.all(clusters.map((c) => c.stop()));
});

/** Deploys without waiting for every replica (?timeoutS=1), then waits until `ready` of them are READY and the rest stay PENDING. */
async function deployExpecting(c: TestCluster, name: string, spec: object, ready: number): Promise<Actor[]> {
  const answer = await call(c.url, 'PUT', `/api/v1/deployments/${name}?timeoutS=1`, {
    body: JSON.stringify(spec),
    headers: JSON_HEADERS,
    timeoutMs: 30_000,
  });
  assert.ok(answer.status === 202 || answer.status === 201 || answer.status === 200, answer.body.toString());
  const actors = await waitFor(
    `${ready} READY replicas of ${name}`,
    async () => {
      const view = (await call(c.url, 'GET', `/api/v1/deployments/${name}`)).json as { actors: Actor[] };
      return view.actors.filter((a) => a.state === 'READY').length === ready ? view.actors : undefined;
    },
    60_000,
    200,
  );
  // Settled: nothing else gets placed a moment later.
  await new Promise((r) => setTimeout(r, 1000));
  const view = (await call(c.url, 'GET', `/api/v1/deployments/${name}`)).json as { actors: Actor[] };
  assert.equal(view.actors.filter((a) => a.state === 'READY').length, ready, JSON.stringify(view.actors));
  return actors;
}

/** A /proc/<pid>/status field, in KiB. */
function procKiB(pid: number, field: 'VmRSS' | 'VmSize'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]);
}

describe('bounded resources: what does not fit stays PENDING with the reason', { timeout: 180_000 }, () => {
  test('a replica asking for a tiny CPU share (1e-300, 0.01) is refused, naming the minimum', async () => {
    const c = await cluster({ agents: [['--cpus', '1']] });
    for (const cpus of [1e-300, 0.01]) {
      const answer = await call(c.url, 'PUT', '/api/v1/deployments/tiny', {
        body: JSON.stringify({ model: 'mlp.onnx', cpus }),
        headers: JSON_HEADERS,
      });
      assertError(answer, 400, 'TROUPE_ERR_BAD_SPEC', /cpus.*at least 0\.05/);
    }
    const view = (await call(c.url, 'GET', '/api/v1/deployments')).json as { deployments: unknown[] };
    assert.equal(view.deployments.length, 0);
  });

  test('a node started with --cpus 1 --max-actors 2 runs 2 of 4 replicas; the others stay PENDING saying so', async () => {
    const c = await cluster({ agents: [['--name', 'n1', '--cpus', '1', '--max-actors', '2']] });
    const actors = await deployExpecting(c, 'capped', { model: 'mlp.onnx', replicas: 4, cpus: 0.1, threads: 1 }, 2);
    const pending = actors.filter((a) => a.state === 'PENDING');
    assert.equal(pending.length, 2, JSON.stringify(actors));
    for (const a of pending) assert.match(a.reason ?? '', /node n1 holds its 2 actors \(--max-actors\)/);
  });

  test('the default memory reservation keeps replicas that would not fit --memory-mib PENDING', async () => {
    // 350 MiB holds three replicas at the 100 MiB each a spec without `memory` reserves.
    const c = await cluster({ agents: [['--name', 'small', '--cpus', '4', '--memory-mib', '350']] });
    const actors = await deployExpecting(c, 'mem', { model: 'mlp.onnx', replicas: 5, cpus: 0.1, threads: 1 }, 3);
    const pending = actors.filter((a) => a.state === 'PENDING');
    assert.equal(pending.length, 2, JSON.stringify(actors));
    for (const a of pending) assert.match(a.reason ?? '', /small has 50 MiB of 350 MiB memory free, a replica reserves 100 MiB/);
  });

  test("a model named by its path reserves its file's estimate once a replica said its size", async () => {
    // mobilenet.onnx is 13.3 MiB: a replica reserves 100 + 2 x 13.3 = 127 MiB once that is known.
    // Before, 300 MiB held three replicas at the base 100 MiB each; now two.
    const c = await cluster({ agents: [['--name', 'small', '--cpus', '4', '--memory-mib', '300']] });
    const spec = { model: 'mobilenet.onnx', cpus: 0.1, threads: 1 };
    await deployExpecting(c, 'big', { ...spec, replicas: 1 }, 1);
    const actors = await deployExpecting(c, 'big', { ...spec, replicas: 3 }, 2);
    const pending = actors.filter((a) => a.state === 'PENDING');
    assert.equal(pending.length, 1, JSON.stringify(actors));
    assert.match(pending[0]!.reason ?? '', /a replica reserves 127 MiB/);
  });

  test('--max-connections 20: past 20 connections that made requests the next is closed; a silent one gives its place to a new one', async () => {
    const c = await cluster({ agents: [], headArgs: ['--max-connections', '20', '--http-workers', '0'] });
    const { hostname, port } = new URL(c.url);
    const open = (): Promise<{ socket: Socket; closed: Promise<void>; answered: Promise<void> }> =>
      new Promise((resolve, reject) => {
        const socket = tcpConnect({ host: hostname, port: Number(port) });
        const closed = new Promise<void>((r) => socket.once('close', () => r()));
        const answered = new Promise<void>((r) => socket.once('data', () => r()));
        socket.on('error', () => {});
        socket.once('connect', () => resolve({ socket, closed, answered }));
        socket.once('error', reject);
      });
    const within = (p: Promise<unknown>, ms: number) =>
      Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
    // Twenty connections that each made a request (kept alive): the cap is full of real clients.
    const first: Awaited<ReturnType<typeof open>>[] = [];
    for (let i = 0; i < 20; i++) {
      const conn = await open();
      conn.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await conn.answered;
      first.push(conn);
    }
    const extra = await open();
    assert.ok(await within(extra.closed, 5000), 'the 21st connection was closed by the head');
    assert.ok(!(await within(Promise.race(first.map((f) => f.closed)), 500)), 'the first 20 connections stay open');
    // Five of them go; five silent ones take their places. A new connection then takes the place of
    // the oldest silent one (slowloris sockets cannot keep clients out), and is served.
    for (const f of first.splice(0, 5)) f.socket.destroy();
    const silent: Awaited<ReturnType<typeof open>>[] = [];
    await waitFor('room for five', async () => {
      const conn = await open();
      if (await within(conn.closed, 300)) return false;
      silent.push(conn);
      return silent.length === 5;
    });
    assert.equal((await call(c.url, 'GET', '/healthz', { timeoutMs: 5000 })).status, 200, 'served at the cap');
    assert.ok(await within(silent[0]!.closed, 5000), 'the oldest silent connection made room');
    for (const f of [...first, ...silent]) f.socket.destroy();
  });

  test('gRPC connections count against --max-connections too, the ones front-door workers hold included', async () => {
    const c = await cluster({ agents: [], headArgs: ['--max-connections', '10', '--http-workers', '1'] });
    const [host, port] = [c.grpcAddress.slice(0, c.grpcAddress.lastIndexOf(':')), Number(c.grpcAddress.split(':').pop())];
    const open = () => {
      const socket = tcpConnect({ host, port });
      socket.on('error', () => {});
      return { socket, closed: new Promise<boolean>((r) => socket.once('close', () => r(true))) };
    };
    const held = Array.from({ length: 10 }, open);
    // The workers report what they hold every half second: soon a new connection finds no room.
    await waitFor(
      'an 11th gRPC connection to be closed',
      async () => {
        const probe = open();
        const closed = await Promise.race([probe.closed, new Promise<boolean>((r) => setTimeout(() => r(false), 300))]);
        probe.socket.destroy();
        return closed;
      },
      15_000,
      200,
    );
    for (const h of held) h.socket.destroy();
    await waitFor('room again', async () => (await call(c.url, 'GET', '/healthz', { timeoutMs: 2000 })).status === 200, 15_000, 200);
  });

  test('a frame declaring 200 MiB whose bytes never come does not take 200 MiB of the head', async () => {
    const c = await cluster({ agents: [] });
    const pid = c.head.process.pid!;
    const stream = new RawStream(`${c.url}/v1/client`, ['reply'], { headers: {} });
    await stream.opened;
    await new Promise((r) => setTimeout(r, 500));
    const before = { rss: procKiB(pid, 'VmRSS'), size: procKiB(pid, 'VmSize') };
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(200 * 2 ** 20);
    // The length and its first 64 KiB, then nothing (the head closes it after 10 s of no message).
    stream.sendRaw(Buffer.concat([prefix, Buffer.alloc(64 * 1024, 7)]));
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(stream.open, 'the head keeps reading the frame');
    const grown = { rss: procKiB(pid, 'VmRSS') - before.rss, size: procKiB(pid, 'VmSize') - before.size };
    // Pages never written are not resident, so an untouched 200 MiB buffer shows in VmSize alone:
    // both are checked, the address space being where the up-front allocation showed.
    assert.ok(grown.rss < 50 * 1024, `RSS grew by ${grown.rss} KiB`);
    assert.ok(grown.size < 100 * 1024, `VmSize grew by ${grown.size} KiB`);
    stream.socket.destroy();
  });
});
