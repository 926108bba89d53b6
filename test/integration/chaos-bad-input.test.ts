import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ERROR_CODES, TroupeError, encodeFrame } from '../../runtime/internal.js';
import type { Cluster, ErrorCode } from '../../runtime/internal.js';
import { isAlive, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { Prng, RawSocket, pack } from '../helpers/fuzz.js';
import { RawStream } from '../helpers/raw-stream.js';
import { seededFloats } from '../helpers/tensors.js';
import { CHAOS_AUTH, FUZZ_SEED, startChaosCluster } from '../helpers/chaos-cluster.js';
import type { ChaosCluster } from '../helpers/chaos-cluster.js';
async function rejectsWith(work: PromiseLike<unknown>, code: ErrorCode, message?: RegExp): Promise<void> {
  await assert.rejects(Promise.resolve(work), (err: unknown) => {
    assert.ok(err instanceof TroupeError, String(err));
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

/**
 * No input, however malformed, takes a process down: named cases, each of which must get its own
 * TROUPE_ERR_* or a socket closed with a reason (chaos-fuzz.test.ts then throws thousands of random
 * ones at the same endpoints).
 */
describe('chaos: bad input everywhere', { timeout: 180_000 }, () => {
  let chaos: ChaosCluster;
  let cluster: TestCluster;
  let client: Cluster;
  let pids: ChaosCluster['pids'];
  let wsBase: string;
  let x: ChaosCluster['x'];

  before(async () => {
    chaos = await startChaosCluster();
    ({ cluster, client, pids, wsBase, x } = chaos);
  });
  after(async () => {
    await chaos?.stop();
  });

  test('a frame far above the size limit closes its socket with 1009; the head stays up', async () => {
    const raw = new RawSocket(`${wsBase}/v1/client`, CHAOS_AUTH, ['reply']);
    await raw.opened;
    raw.send(Buffer.alloc(4 * 2 ** 20), true);
    await raw.closed;
    assert.equal(raw.closeCode, 1009);
    assert.ok(isAlive(pids.head));
    assert.deepEqual((await client.run('mlp', x())).logits!.shape, [1, 10]);
  });

  test('malformed tensors, shapes, frames and specs each get their own TROUPE_ERR_*', async () => {
    const raw = new RawSocket(`${wsBase}/v1/client`, CHAOS_AUTH, ['reply']);
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
    const raw = new RawSocket(`${wsBase}/v1/client`, CHAOS_AUTH, ['reply']);
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
      headers: { 'content-type': 'application/yaml', ...CHAOS_AUTH },
    });
    assert.equal(put.status, 400, await put.clone().text());
    const unauth = await fetch(`${cluster.url}/api/v1/deployments/fz`, {
      method: 'PUT',
      body: '{"model":"mlp.onnx"}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(unauth.status, 401);
  });

  test('the WebSocket endpoints and the frame-stream upgrades refuse a missing or wrong token or a wrong actor secret', async () => {
    // A client without a token is let in on loopback, for runs only (http-auth.test.ts); a wrong one never.
    for (const [path, headers] of [
      ['/v1/client', { authorization: 'Bearer wrong-token-123' }],
      ['/v1/agent', {}],
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
    const wrong = new RawStream(`${cluster.url}/v1/client`, ['reply'], { headers: { authorization: 'Bearer wrong-token-123' } });
    await assert.rejects(wrong.opened, /HTTP 401 missing or wrong cluster token/);
  });

  test(`the hardening classes, seeded (seed ${FUZZ_SEED}): spec bombs, element bombs, tiny shares, hostile paths; each refused with its code, nothing kept, nothing exits`, async () => {
    const r = new Prng(FUZZ_SEED + 1);
    const put = (name: string, body: string, type = 'application/json') =>
      fetch(`${cluster.url}/api/v1/deployments/${name}?timeoutS=30`, {
        method: 'PUT',
        body,
        headers: { 'content-type': type, ...CHAOS_AUTH },
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
    const list = (await (await fetch(`${cluster.url}/api/v1/deployments`, { headers: CHAOS_AUTH })).json()) as
      { name: string }[] | { deployments: { name: string }[] };
    const names = (Array.isArray(list) ? list : list.deployments).map((d) => d.name).sort();
    assert.deepEqual(names, ['hostile', 'mlp'], 'nothing refused was kept');
    assert.equal((await fetch(`${cluster.url}/v2/health/ready`)).status, 200, 'the server stays ready');
    for (const [role, pid] of Object.entries(pids)) assert.ok(isAlive(pid), `${role} (pid ${pid}) is still running`);
    assert.equal(
      (await infer(JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(seededFloats(64, 1)) }] })))
        .status,
      200,
    );
  });
});
