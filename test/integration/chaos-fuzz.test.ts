import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ERROR_CODES, RoutesSchema, TroupeError, connect, encodeFrame, tensor, toWire } from '../../runtime/internal.js';
import type { Cluster, ErrorCode, Routes } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { Prng, RawSocket, fuzzFrame, mutateBytes, pack, randomJson } from '../helpers/fuzz.js';
import { RawStream } from '../helpers/raw-stream.js';
import { seededFloats } from '../helpers/tensors.js';

const TOKEN = 'fuzz-token-0123456789';
const SEED = Number(process.env.TROUPE_TEST_FUZZ_SEED ?? 20240611);
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** Resident memory of a process, from /proc (bytes). */
async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

async function rejectsWith(work: PromiseLike<unknown>, code: ErrorCode, message?: RegExp): Promise<void> {
  await assert.rejects(Promise.resolve(work), (err: unknown) => {
    assert.ok(err instanceof TroupeError, String(err));
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

/**
 * No input, however malformed, takes a process down. Named cases first (each must get its own
 * TROUPE_ERR_* or a socket closed with a reason), then a few thousand random and mutated frames
 * and HTTP bodies from a seeded PRNG (TROUPE_TEST_FUZZ_SEED replays a run) against every endpoint a
 * peer can reach: /v1/client, /v1/agent (with the token), /v1/actor (as a real actor, with its
 * secret), an actor's direct-call endpoint (with the token the head hands clients), and the
 * inference and deployment endpoints. Afterwards every process is the same one
 * and a valid request succeeds.
 */
describe('chaos: bad input everywhere, then a fuzzer', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let pids: { head: number; agent: number; actor: number };
  let wsBase: string;
  const x = () => ({ x: tensor('float32', [1, 64], seededFloats(64, 1)) });

  before(async () => {
    cluster = await startCluster({
      headArgs: ['--token', TOKEN, '--max-frame-mib', '1', '--max-body-mib', '1'],
      agents: [['--token', TOKEN, '--name', 'n1', '--cpus', '4']],
    });
    wsBase = cluster.url.replace('http', 'ws');
    client = await connect(cluster.url, { token: TOKEN });
    const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    pids = { head: cluster.head.process.pid!, agent: cluster.agents[0]!.process.pid!, actor: view.actors[0]!.pid! };
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  /** The routes the head hands an admitted client for `deployment`. */
  const routesOf = async (deployment: string): Promise<Routes> => {
    const raw = new RawSocket(`${wsBase}/v1/client`, AUTH, ['reply']);
    await raw.opened;
    raw.send(pack([{ type: 'routes', id: 'routes-1', deployment }]), true);
    const answer = await waitFor('the routes', () => raw.received.find((m) => (m as { id?: string }).id === 'routes-1'), 10_000);
    raw.close();
    return RoutesSchema.parse((answer as { value: unknown }).value);
  };

  test('a frame far above the size limit closes its socket with 1009; the head stays up', async () => {
    const raw = new RawSocket(`${wsBase}/v1/client`, AUTH, ['reply']);
    await raw.opened;
    raw.send(Buffer.alloc(4 * 2 ** 20), true);
    await raw.closed;
    assert.equal(raw.closeCode, 1009);
    assert.ok(isAlive(pids.head));
    assert.deepEqual((await client.run('mlp', x())).logits!.shape, [1, 10]);
  });

  test('malformed tensors, shapes, frames and specs each get their own TROUPE_ERR_*', async () => {
    const raw = new RawSocket(`${wsBase}/v1/client`, AUTH, ['reply']);
    await raw.opened;
    const ask = async (message: Record<string, unknown>): Promise<{ code: string; message: string }> => {
      raw.send(encodeFrame([message]), true);
      // Answers come in the order they are ready, not the order asked: wait for this one's.
      const answer = (await waitFor(
        `the answer to ${String(message.id)}`,
        () => raw.received.find((m) => (m as { id?: unknown }).id === message.id),
        15_000,
      )) as { type: string; error?: { code: string; message: string } } | undefined;
      assert.equal(answer?.type, 'fail', JSON.stringify(answer));
      return answer!.error!;
    };
    const run = (id: string, t: Record<string, unknown>) => ({ type: 'run', id, deployment: 'mlp', inputs: { x: t } });
    const f32 = (shape: unknown[], bytes: number) => ({ dtype: 'float32', shape, data: new Uint8Array(bytes) });

    assert.match((await ask(run('short', f32([1, 64], 252)))).message, /needs 256 bytes, got 252/);
    // NaN and ±Infinity are not numbers to the schema; a number that is no dim is not a shape.
    for (const [id, dim] of [
      ['nan', Number.NaN],
      ['inf', Number.POSITIVE_INFINITY],
      ['ninf', Number.NEGATIVE_INFINITY],
    ] as const) {
      const error = await ask(run(id, f32([dim, 64], 256)));
      assert.equal(error.code, 'TROUPE_ERR_BAD_MESSAGE', `${id}: ${error.message}`);
      assert.match(error.message, /inputs\.x\.shape\.0/);
    }
    for (const [id, dim] of [
      ['huge', 1e300],
      ['frac', 0.5],
      ['negative', -64],
    ] as const) {
      const error = await ask(run(id, f32([dim, 64], 256)));
      assert.equal(error.code, 'TROUPE_ERR_BAD_TENSOR', `${id}: ${error.message}`);
      assert.match(error.message, /dims must be integers >= 0/);
    }
    // A shape whose element count overflows anything allocatable, with a few bytes of data: refused, nothing allocated.
    const overflow = await ask(run('overflow', f32([2 ** 31, 2 ** 31, 2 ** 31], 8)));
    assert.equal(overflow.code, 'TROUPE_ERR_BAD_TENSOR', overflow.message);
    const rank = await ask(
      run(
        'rank',
        f32(
          Array.from({ length: 40 }, () => 1),
          4,
        ),
      ),
    );
    assert.equal(rank.code, 'TROUPE_ERR_BAD_MESSAGE', rank.message);
    // Unknown fields: deployment specs are strict.
    const unknown = await ask({ type: 'deploy', id: 'unknown', spec: { name: 'fz', model: 'mlp.onnx', replicaz: 2 } });
    assert.equal(unknown.code, 'TROUPE_ERR_BAD_SPEC');
    assert.match(unknown.message, /replicaz/);
    raw.close();

    // A graph with a cycle, and one with thousands of steps.
    const cycle = {
      graph: 'loop',
      nodes: [
        { kind: 'pipeline', name: 'loop', steps: ['a'] },
        { kind: 'pipeline', name: 'a', steps: ['loop'] },
      ],
    };
    await rejectsWith(client.deploy(cycle as never), 'TROUPE_ERR_BAD_SPEC', /cycle/);
    const steps = Array.from({ length: 5000 }, (_, i) => `s${i}`);
    const long = { graph: 'long', nodes: [{ kind: 'pipeline', name: 'long', steps }, ...steps.map((name) => ({ kind: 'model', name }))] };
    await rejectsWith(client.deploy(long as never), 'TROUPE_ERR_BAD_SPEC');
    const deep = {
      graph: 'deep',
      nodes: [
        { kind: 'pipeline', name: 'deep', steps: Array.from({ length: 200 }, () => 'mlp') },
        { kind: 'model', name: 'mlp' },
      ],
    };
    await client.deploy(deep as never).then(
      () => undefined,
      (err: unknown) => assert.ok(err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_SPEC', String(err)),
    );
  });

  test('frames msgpack cannot or should not decode: deep nesting, lying lengths, text', async () => {
    const raw = new RawSocket(`${wsBase}/v1/client`, AUTH, ['reply']);
    await raw.opened;
    const frames: Buffer[] = [
      Buffer.alloc(100_000, 0x91), // an array in an array in an array ...
      Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff]), // array32 claiming 4 billion items
      Buffer.from([0xdf, 0xff, 0xff, 0xff, 0xff]), // map32 likewise
      Buffer.from([0xc6, 0xff, 0xff, 0xff, 0xff, 0x00]), // bin32 claiming 4 GiB
      Buffer.from([0xc1]), // never used
      pack({ type: 'run' }), // not an array of messages
    ];
    for (const f of frames) raw.send(f, true);
    raw.send('not msgpack', false);
    assert.ok(await raw.probe('after-bad-frames'));
    const fails = raw.received.filter((m) => (m as { type?: string }).type === 'fail') as { error: { code: string } }[];
    assert.equal(fails.length, frames.length + 2);
    assert.deepEqual([...new Set(fails.slice(0, -1).map((m) => m.error.code))], ['TROUPE_ERR_BAD_FRAME']);
    assert.deepEqual(raw.problems, []);
    raw.close();
  });

  test('HTTP: oversize, lying and malformed bodies get their TROUPE_ERR_* and status', async () => {
    const infer = (body: string | Buffer, headers: Record<string, string> = {}) =>
      fetch(`${cluster.url}/v2/models/mlp/infer`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
    const expect = async (res: Response, status: number, code: ErrorCode) => {
      const body = (await res.json()) as { code?: string; error?: string };
      assert.equal(res.status, status, JSON.stringify(body));
      assert.equal(body.code, code, body.error);
    };
    await expect(await infer(Buffer.alloc(2 * 2 ** 20, 0x20)), 413, 'TROUPE_ERR_BODY_TOO_LARGE');
    await expect(await infer('{"inputs": [', {}), 400, 'TROUPE_ERR_BAD_REQUEST');
    await expect(await infer('{}', { 'inference-header-content-length': '999' }), 400, 'TROUPE_ERR_BAD_REQUEST');
    const lying = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: [1, 2, 3] }] });
    const res = await infer(lying);
    assert.equal(res.status, 400, await res.clone().text());
    assert.ok(ERROR_CODES.includes(((await res.json()) as { code: ErrorCode }).code));
    const nanShape = '{"inputs": [{"name": "x", "shape": [NaN, 64], "datatype": "FP32", "data": []}]}';
    await expect(await infer(nanShape), 400, 'TROUPE_ERR_BAD_REQUEST');
    const bomb = `a: &a ["x","x","x","x","x","x","x","x","x"]\n${Array.from(
      { length: 12 },
      (_, i) =>
        `b${i}: &b${i} [${Array(9)
          .fill(i === 0 ? '*a' : `*b${i - 1}`)
          .join(',')}]`,
    ).join('\n')}\n`;
    const put = await fetch(`${cluster.url}/api/v1/deployments/fz?wait=false`, {
      method: 'PUT',
      body: bomb,
      headers: { 'content-type': 'application/yaml', ...AUTH },
    });
    assert.equal(put.status, 400, await put.clone().text());
    const unauth = await fetch(`${cluster.url}/api/v1/deployments/fz`, {
      method: 'PUT',
      body: '{"model":"mlp.onnx"}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(unauth.status, 401);
  });

  test('the WebSocket endpoints and the frame-stream upgrades refuse a missing token or a wrong actor secret', async () => {
    for (const [path, headers] of [
      ['/v1/client', {}],
      ['/v1/agent', { authorization: 'Bearer wrong-token-123' }],
      ['/v1/actor', { 'x-troupe-actor-id': 'nobody', 'x-troupe-actor-secret': 'not-the-secret' }],
    ] as const) {
      const raw = new RawSocket(`${wsBase}${path}`, headers, []);
      await assert.rejects(raw.opened, /HTTP 401/, path);
    }
    // Actors and SDK clients upgrade to a frame stream instead; the same checks come before the switch.
    const stranger = new RawStream(`${cluster.url}/v1/actor`, ['call'], {
      headers: { 'x-troupe-actor-id': 'nobody', 'x-troupe-actor-secret': 'not-the-secret' },
    });
    await assert.rejects(stranger.opened, /HTTP 401 unknown actor or wrong actor secret/);
    const tokenless = new RawStream(`${cluster.url}/v1/client`, ['reply'], { headers: {} });
    await assert.rejects(tokenless.opened, /HTTP 401 missing or wrong cluster token/);
  });

  test(`the hardening classes, seeded (seed ${SEED}): spec bombs, element bombs, tiny shares, hostile paths; each refused with its code, nothing kept, nothing exits`, async () => {
    const r = new Prng(SEED + 1);
    const put = (name: string, body: string, type = 'application/json') =>
      fetch(`${cluster.url}/api/v1/deployments/${name}?timeoutS=30`, {
        method: 'PUT',
        body,
        headers: { 'content-type': type, ...AUTH },
        signal: AbortSignal.timeout(60_000),
      });
    const infer = (body: string) =>
      fetch(`${cluster.url}/v2/models/mlp/infer`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
        signal: AbortSignal.timeout(60_000),
      });
    const refused = async (res: Response, codes: readonly ErrorCode[], what: string) => {
      const body = (await res.json().catch(() => ({}))) as { code?: ErrorCode; error?: string };
      assert.ok(res.status >= 400 && res.status < 500, `${what}: ${res.status} ${JSON.stringify(body)}`);
      assert.ok(body.code !== undefined && codes.includes(body.code), `${what}: ${body.code} ${body.error}`);
    };
    const classes: (() => Promise<void>)[] = [
      // A spec of thousands of keys (the yaml parser's duplicate check is quadratic).
      async () => {
        const keys = 2_500 + r.int(60_000);
        const yaml = `model: mlp.onnx\n${Array.from({ length: keys }, (_, i) => `k${i}: ${i}`).join('\n')}\n`;
        await refused(
          await put('fz-yaml', yaml, 'application/yaml'),
          ['TROUPE_ERR_SPEC_TOO_LARGE', 'TROUPE_ERR_BODY_TOO_LARGE'],
          `${keys}-key YAML`,
        );
      },
      // Declared shapes far beyond any model, or data of the wrong kind and count.
      async () => {
        const shape = [2 ** (20 + r.int(30)), 64];
        await refused(
          await infer(JSON.stringify({ inputs: [{ name: 'x', shape, datatype: 'FP32', data: [] }] })),
          ['TROUPE_ERR_TOO_MANY_ELEMENTS', 'TROUPE_ERR_BAD_INPUT', 'TROUPE_ERR_BAD_TENSOR'],
          `shape ${shape}`,
        );
      },
      async () => {
        const count = 2_000 + r.int(100_000);
        const body = `{"inputs":[{"name":"x","shape":[1,64],"datatype":"BYTES","data":[${Array(count).fill('""').join(',')}]}]}`;
        await refused(
          await infer(body),
          ['TROUPE_ERR_BAD_TENSOR', 'TROUPE_ERR_BAD_INPUT', 'TROUPE_ERR_TOO_MANY_ELEMENTS', 'TROUPE_ERR_BODY_TOO_LARGE'],
          `${count} BYTES strings`,
        );
      },
      // CPU shares too small to bound how many actors a node starts.
      async () => {
        const cpus = r.pick([1e-300, 1e-9, 0.001, 0.01, 0.049]);
        await refused(await put('fz-cpus', JSON.stringify({ model: 'mlp.onnx', cpus })), ['TROUPE_ERR_BAD_SPEC'], `cpus ${cpus}`);
      },
      // Paths out of the model directory, and fn references on an agent without a module directory.
      async () => {
        const model = r.pick(['../mlp.onnx', '/etc/passwd', '.troupe/x.onnx', 'node_modules/x.onnx', '..%2Fmlp.onnx']);
        await refused(
          await put('fz-path', JSON.stringify({ model })),
          ['TROUPE_ERR_MODEL_PATH', 'TROUPE_ERR_BAD_SPEC', 'TROUPE_ERR_UNKNOWN_MODEL'],
          `model ${model}`,
        );
      },
      async () => {
        const ref = r.pick(['node_modules/zod/index.js#z', '../../etc/passwd#f', '.git/hooks/x.js#f', 'steps.js#standardize']);
        const graph = {
          graph: 'fz-fn',
          nodes: [{ kind: 'pipeline', name: 'fz-fn', steps: [{ kind: 'fn', name: 'fz-fn-step', fn: ref }] }],
        };
        await refused(
          await put('fz-fn', JSON.stringify(graph)),
          ['TROUPE_ERR_NO_MODULE_DIR', 'TROUPE_ERR_MODEL_PATH', 'TROUPE_ERR_BAD_SPEC'],
          `fn ${ref}`,
        );
      },
    ];
    for (let i = 0; i < 30; i++) await r.pick(classes)();
    const list = (await (await fetch(`${cluster.url}/api/v1/deployments`, { headers: AUTH })).json()) as
      { name: string }[] | { deployments: { name: string }[] };
    const names = (Array.isArray(list) ? list : list.deployments).map((d) => d.name);
    assert.deepEqual(names, ['mlp'], 'nothing refused was kept');
    assert.equal((await fetch(`${cluster.url}/v2/health/ready`)).status, 200, 'the server stays ready');
    for (const [role, pid] of Object.entries(pids)) assert.ok(isAlive(pid), `${role} (pid ${pid}) is still running`);
    assert.equal(
      (await infer(JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(seededFloats(64, 1)) }] })))
        .status,
      200,
    );
  });

  test(`a seeded fuzzer (seed ${SEED}): thousands of random and mutated frames and bodies; every answer is a proper error; nothing exits`, async () => {
    const r = new Prng(SEED);
    const rssBefore = await rssOf(pids.head);
    const wire = toWire(x().x);
    const state = JSON.parse(await readFile(join(cluster.dataDir, 'state.json'), 'utf8')) as { actors: { id: string; secret: string }[] };
    const actor = state.actors[0]!;
    const replica = (await routesOf('mlp')).replicas[0]!;
    const actorHeaders = { 'x-troupe-actor-id': actor.id, 'x-troupe-actor-secret': actor.secret };
    const actorTemplates = [
      { type: 'stats', stats: { calls: 1, batches: 1, rows: 1, expired: 0, failed: 0, computeMs: 1, queueMs: 1, queued: 0 } },
      { type: 'reply', id: 'r1', value: { outputs: { logits: wire } } },
      { type: 'fail', id: 'r2', error: { code: 'TROUPE_ERR_INFERENCE', message: 'x' } },
    ];

    const clientTemplates = [
      { type: 'run', id: 'c1', deployment: 'mlp', inputs: { x: wire } },
      { type: 'run', id: 'c2', deployment: 'mlp', inputs: { x: wire }, outputs: ['logits'], timeoutMs: 5000, trace: true },
      { type: 'run', id: 'c3', deployment: 'mlp', inputs: {}, refs: { x: { run: 'c1' } } },
      { type: 'describe', id: 'c4' },
      { type: 'deploy', id: 'c5', spec: { name: 'fz', model: 'missing.onnx', replicas: 1 }, wait: false },
      { type: 'deploy', id: 'c6', spec: { graph: 'fzg', nodes: [{ kind: 'pipeline', name: 'fzg', steps: ['fzg'] }] } },
      { type: 'undeploy', id: 'c7', name: 'fz' },
    ];
    const endpoints = [
      { path: '/v1/client', headers: AUTH, allowed: ['reply'], frames: 1500, templates: clientTemplates },
      {
        path: '/v1/agent',
        headers: AUTH,
        allowed: ['reply', 'startActor', 'stopActor'],
        frames: 700,
        templates: [
          { type: 'register', id: 'a1', name: 'fuzz-node', resources: { cpus: 0.001, memoryBytes: 0, gpus: [] }, actors: [] },
          { type: 'heartbeat', processes: [{ actorId: null, pid: 1, rssBytes: 1, cpuSeconds: 1 }] },
          { type: 'actorExited', actorId: 'zz', code: 1, signal: null, stderrTail: '' },
          { type: 'reply', id: 'a2', value: { pid: 1 } },
        ],
      },
      {
        path: '/v1/actor',
        headers: actorHeaders,
        allowed: ['call'],
        frames: 500,
        templates: actorTemplates,
      },
    ];

    const problems: string[] = [];
    const closeCodes = new Map<number, number>();
    let sent = 0;
    for (const ep of endpoints) {
      let socket: RawSocket | undefined;
      for (let i = 0; i < ep.frames; i++) {
        if (!socket?.open) {
          if (socket) {
            // Closing (the head sent its close frame): wait for the handshake to finish, bounded.
            await Promise.race([socket.closed, new Promise((resolve) => setTimeout(resolve, 5000))]);
            closeCodes.set(socket.closeCode ?? 0, (closeCodes.get(socket.closeCode ?? 0) ?? 0) + 1);
          }
          socket = new RawSocket(`${wsBase}${ep.path}`, ep.headers as Record<string, string>, [...ep.allowed]);
          await socket.opened;
        }
        const frame = fuzzFrame(r, ep.templates);
        socket.send(frame.data, frame.binary);
        sent++;
        // Every few frames, make sure the head has read them all and answered.
        if (i % 25 === 24) await socket.probe(`probe-${ep.path}-${i}`);
        problems.push(...socket.problems.splice(0).map((p) => `${ep.path}: ${p}`));
      }
      await socket?.probe(`probe-${ep.path}-end`);
      problems.push(...(socket?.problems.splice(0) ?? []).map((p) => `${ep.path}: ${p}`));
      socket?.close();
    }
    // A socket is only ever closed for a reason ws names: too big (1009), not UTF-8 (1007), or a protocol error (1002).
    for (const code of closeCodes.keys()) assert.ok([1002, 1007, 1009].includes(code), `socket closed with ${code}`);

    /**
     * `count` random and mutated frames over length-prefixed streams opened by `open`; now and then
     * the framing itself is broken (an empty frame, a length over the limit, a length and then
     * silence cut short by the next frame): the far end answers BAD_FRAME and closes that
     * connection, and a new one is opened. Returns how many connections were closed that way.
     */
    const fuzzStream = async (
      label: string,
      count: number,
      open: () => Promise<RawStream>,
      templates: readonly Record<string, unknown>[],
    ) => {
      let stream: RawStream | undefined;
      let closes = 0;
      for (let i = 0; i < count; i++) {
        if (!stream?.open) {
          if (stream) {
            await Promise.race([stream.closed, new Promise((resolve) => setTimeout(resolve, 5000))]);
            closes++;
          }
          stream = await open();
        }
        if (r.next() < 0.03) stream.sendRaw(r.pick([Buffer.alloc(4), Buffer.from([0xff, 0xff, 0xff, 0xff])]));
        else stream.send(Buffer.from(fuzzFrame(r, templates).data));
        sent++;
        if (i % 25 === 24) await stream.probe(`probe-${label}-${i}`);
        problems.push(...stream.problems.splice(0).map((p) => `${label}: ${p}`));
      }
      await stream?.probe(`probe-${label}-end`);
      problems.push(...(stream?.problems.splice(0) ?? []).map((p) => `${label}: ${p}`));
      stream?.close();
      return closes;
    };
    // The actor's own endpoint for direct calls from SDK clients (length-prefixed frames over TCP),
    // after a hello with the token the head hands them.
    const directTemplates = [
      { type: 'call', id: 'd1', inputs: { x: wire } },
      { type: 'call', id: 'd2', inputs: { x: wire }, outputs: ['logits'], timeoutMs: 5000 },
      { type: 'hello', id: 'd3', token: replica.token },
    ];
    const streamCloses = await fuzzStream(
      'direct',
      500,
      async () => {
        const stream = new RawStream(replica.url);
        await stream.opened;
        assert.equal((await stream.hello(replica.token))?.type, 'reply', 'the replica admits a client with its token');
        return stream;
      },
      directTemplates,
    );
    assert.ok(streamCloses > 0, 'broken framing closed some direct connections');
    // The head's actor and client endpoints upgraded to the same framing, as actors and SDK clients
    // reach them over plain HTTP: as a real actor with its secret, and with the cluster token.
    const upgradedCloses: Record<string, number> = {};
    for (const [path, allowed, headers, templates] of [
      ['/v1/actor', ['call'], actorHeaders, actorTemplates],
      ['/v1/client', ['reply'], AUTH, clientTemplates],
    ] as const) {
      const open = async () => {
        const stream = new RawStream(`${cluster.url}${path}`, allowed, { headers });
        await stream.opened;
        return stream;
      };
      upgradedCloses[path] = await fuzzStream(`${path} frames`, 500, open, templates);
      assert.ok(upgradedCloses[path] > 0, `broken framing closed some ${path} frame streams`);
    }

    const http: { url: string; method: string; headers: Record<string, string>; body: () => Buffer | string }[] = [];
    const inferJson = JSON.stringify({
      id: '7',
      inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(seededFloats(64, 2)) }],
    });
    const inferHeader = JSON.stringify({
      inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', parameters: { binary_data_size: 256 } }],
      outputs: [{ name: 'logits', parameters: { binary_data: true } }],
    });
    const inferBinary = Buffer.concat([Buffer.from(inferHeader), Buffer.from(seededFloats(64, 3).buffer)]);
    const spec = JSON.stringify({ model: 'missing.onnx', replicas: 1, cpus: 0.5 });
    for (let i = 0; i < 700; i++) {
      const kind = r.int(3);
      if (kind < 2) {
        const binary = r.next() < 0.4;
        const base = binary ? inferBinary : Buffer.from(inferJson);
        const variant = r.int(4);
        const body = variant === 0 ? r.bytes(r.int(512)) : variant === 1 ? randomJson(r) : mutateBytes(r, base);
        const headers: Record<string, string> = {
          'content-type': r.pick(['application/json', 'application/octet-stream', 'text/plain', 'application/yaml']),
        };
        if (binary || r.next() < 0.1)
          headers['inference-header-content-length'] = r.pick([String(inferHeader.length), String(r.int(2000)), '-1', '1e9', 'abc', '']);
        http.push({ url: `/v2/models/${r.next() < 0.9 ? 'mlp' : 'nope'}/infer`, method: 'POST', headers, body: () => body });
      } else {
        const body = r.next() < 0.5 ? mutateBytes(r, Buffer.from(spec)) : randomJson(r);
        const headers = { 'content-type': r.pick(['application/json', 'application/yaml', 'text/plain']), ...AUTH };
        http.push({ url: `/api/v1/deployments/fz${r.int(3)}?wait=false`, method: 'PUT', headers, body: () => body });
      }
    }
    const statuses = new Map<number, number>();
    for (const h of http) {
      const res = await fetch(`${cluster.url}${h.url}`, {
        method: h.method,
        headers: h.headers,
        body: h.body(),
        signal: AbortSignal.timeout(20_000),
      });
      sent++;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const text = await res.text();
      if (res.status >= 400) {
        let body: { code?: unknown; error?: unknown } | undefined;
        try {
          body = JSON.parse(text) as typeof body;
        } catch {
          problems.push(`${h.method} ${h.url}: ${res.status} without a JSON error: ${text.slice(0, 100)}`);
          continue;
        }
        if (!ERROR_CODES.includes(body?.code as never) || typeof body?.error !== 'string')
          problems.push(`${h.method} ${h.url}: ${res.status} ${text.slice(0, 200)}`);
        else if (body.code === 'TROUPE_ERR_INTERNAL' || res.status >= 500)
          problems.push(`${h.method} ${h.url}: ${res.status} ${text.slice(0, 200)}`);
      }
    }

    assert.deepEqual(problems.slice(0, 20), [], `${problems.length} improper answers`);
    assert.ok(sent >= 3000, `${sent} frames and bodies sent`);
    // Same processes, and a valid request works over a fresh connection and over HTTP.
    assert.ok(isAlive(pids.head) && isAlive(pids.agent) && isAlive(pids.actor));
    const view = await client.describe();
    const mlp = view.deployments.find((d) => d.name === 'mlp')!;
    assert.equal(mlp.actors[0]!.pid, pids.actor);
    assert.equal(mlp.actors[0]!.restarts, 0);
    const fresh = await connect(cluster.url, { token: TOKEN });
    assert.deepEqual((await fresh.run('mlp', x())).logits!.shape, [1, 10]);
    await fresh.close();
    const ok = await fetch(`${cluster.url}/v2/models/mlp/infer`, {
      method: 'POST',
      body: inferJson,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(ok.status, 200, await ok.clone().text());
    const rssAfter = await rssOf(pids.head);
    process.stderr.write(
      `# chaos-fuzz seed ${SEED}: ${sent} frames and bodies; closes ${JSON.stringify([...closeCodes])}; frame streams closed: direct ${streamCloses}, upgraded ${JSON.stringify(upgradedCloses)}; HTTP ${JSON.stringify([...statuses])}; head RSS ${Math.round(rssBefore / 2 ** 20)} -> ${Math.round(rssAfter / 2 ** 20)} MiB\n`,
    );
    // Bounded memory: a few thousand bad inputs must not leave the head holding onto them.
    assert.ok(rssAfter < rssBefore + 256 * 2 ** 20, `head RSS grew from ${rssBefore} to ${rssAfter} bytes`);
  });
});
