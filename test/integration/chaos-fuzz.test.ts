import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ERROR_CODES, connect, toWire } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { Prng, RawSocket, fuzzFrame, hostileJson, mutateBytes, pack, packWithDeepArgument, randomJson } from '../helpers/fuzz.js';
import { rawExchange } from '../helpers/http.js';
import { RawStream } from '../helpers/raw-stream.js';
import { seededFloats } from '../helpers/tensors.js';
import { CHAOS_AUTH, CHAOS_TOKEN, FUZZ_SEED, rssOf, startChaosCluster } from '../helpers/chaos-cluster.js';
import type { ChaosCluster } from '../helpers/chaos-cluster.js';
/**
 * No input, however malformed, takes a process down: a few thousand random and mutated frames and
 * HTTP bodies from a seeded PRNG (TROUPE_TEST_FUZZ_SEED replays a run) against every endpoint a
 * peer can reach: /v1/client, /v1/agent (with the token), /v1/actor (as a real actor, with its
 * secret), an actor's direct-call endpoint (with the token the head hands clients), and the
 * inference (generate included) and deployment endpoints. Afterwards every process is the same one and a valid request
 * succeeds. (The named bad inputs: chaos-bad-input.test.ts.)
 */
/**
 * One request and its answer. A head that refuses a body before reading all of it (413) answers and
 * closes while the client still writes; fetch then loses the answer (`fetch failed`, seen under the
 * whole suite's load), so the same bytes go again on a raw socket, which keeps what was answered.
 */
async function exchange(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<{ status: number; text: string }> {
  try {
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, text: await res.text() };
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    const lines = [`${method} ${path} HTTP/1.1`, `host: ${new URL(base).host}`, 'connection: close'];
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
    if (body !== undefined) lines.push(`content-length: ${Buffer.byteLength(body)}`);
    const [answer] = await rawExchange(
      base,
      Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), Buffer.from(body ?? '')]),
      30_000,
    );
    if (!answer)
      throw new Error(`${method} ${path.slice(0, 80)}: no answer on fetch (${(err as Error).message}) nor on a raw socket`, { cause: err });
    return { status: answer.status, text: answer.body.toString('utf8') };
  }
}

describe('chaos: a seeded fuzzer', { timeout: 180_000 }, () => {
  let chaos: ChaosCluster;
  let cluster: TestCluster;
  let client: Cluster;
  let pids: ChaosCluster['pids'];
  let wsBase: string;
  let x: ChaosCluster['x'];
  let routesOf: ChaosCluster['routesOf'];

  before(async () => {
    chaos = await startChaosCluster();
    ({ cluster, client, pids, wsBase, x, routesOf } = chaos);
  });
  after(async () => {
    await chaos?.stop();
  });

  test(`a seeded fuzzer (seed ${FUZZ_SEED}): thousands of random and mutated frames and bodies; every answer is a proper error; nothing exits`, async () => {
    const r = new Prng(FUZZ_SEED);
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
      { type: 'runStream', id: 'c8', deployment: 'mlp', inputs: { x: wire }, credit: 2 },
      { type: 'streamCredit', id: 'c9', stream: 'c8', n: 1 },
      { type: 'streamCancel', id: 'c10', stream: 'c8' },
    ];
    const endpoints = [
      { path: '/v1/client', headers: CHAOS_AUTH, allowed: ['reply', 'streamItem'], frames: 1500, templates: clientTemplates },
      {
        path: '/v1/agent',
        headers: CHAOS_AUTH,
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
      ['/v1/client', ['reply', 'streamItem'], CHAOS_AUTH, clientTemplates],
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
    const generateJson = JSON.stringify({ id: 'g', x: Array.from(seededFloats(64, 4)), parameters: { max_tokens: 3 } });
    // The generate extension's bodies by name: too deep, too wide, too large, and the wrong types.
    for (const body of [
      '['.repeat(200_000),
      `{"x": ${'['.repeat(20)}1${']'.repeat(20)}}`,
      JSON.stringify(Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`in${i}`, i]))),
      // Just under this head's 1 MiB body bound: parsed, then refused by the model's shape.
      `{"x": [${'0,'.repeat(500_000)}0]}`,
      JSON.stringify({ x: 'text' }),
      JSON.stringify({ x: { nested: true } }),
      JSON.stringify({ x: [1, [2, 3]] }),
      JSON.stringify({ id: 7, x: [1] }),
      'null',
      '[]',
    ])
      for (const url of ['/v2/models/mlp/generate', '/v2/models/mlp/generate_stream'])
        http.push({ url, method: 'POST', headers: { 'content-type': 'application/json' }, body: () => body });
    for (let i = 0; i < 700; i++) {
      const kind = r.int(4);
      if (kind === 3) {
        const body = r.next() < 0.5 ? mutateBytes(r, Buffer.from(generateJson)) : randomJson(r);
        const url = `/v2/models/${r.pick(['mlp', 'mlp', 'nope', '%00'])}/${r.pick(['generate', 'generate_stream'])}`;
        http.push({ url, method: 'POST', headers: { 'content-type': r.pick(['application/json', 'text/plain']) }, body: () => body });
        continue;
      }
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
        const headers = { 'content-type': r.pick(['application/json', 'application/yaml', 'text/plain']), ...CHAOS_AUTH };
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
    const fresh = await connect(cluster.url, { token: CHAOS_TOKEN });
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
      `# chaos-fuzz seed ${FUZZ_SEED}: ${sent} frames and bodies; closes ${JSON.stringify([...closeCodes])}; frame streams closed: direct ${streamCloses}, upgraded ${JSON.stringify(upgradedCloses)}; HTTP ${JSON.stringify([...statuses])}; head RSS ${Math.round(rssBefore / 2 ** 20)} -> ${Math.round(rssAfter / 2 ** 20)} MiB\n`,
    );
    // Bounded memory: a few thousand bad inputs must not leave the head holding onto them.
    assert.ok(rssAfter < rssBefore + 256 * 2 ** 20, `head RSS grew from ${rssBefore} to ${rssAfter} bytes`);
  });

  test(`deep, wide and large values (seed ${FUZZ_SEED}) to every HTTP route of the OpenAPI document, server-sent events and SDK frames: answered with codes; the head lives and answers /healthz`, async () => {
    const r = new Prng(FUZZ_SEED + 47);
    const doc = (await (await fetch(`${cluster.url}/docs/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const problems: string[] = [];
    const healthz = async (after: string) => {
      if (!isAlive(pids.head)) throw new Error(`the head exited after ${after}`);
      const answer = await fetch(`${cluster.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(answer.status, 200, `/healthz after ${after}`);
    };
    /** A place for a hostile value in each kind of body the routes take. */
    const bodies = (v: string) => [
      v,
      `{"args": [${v}]}`,
      `{"text_input": ${v}}`,
      `{"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": ${v}}]}`,
      `{"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [0], "parameters": ${v}}]}`,
      `{"model": "mlp.onnx", "kind": "class", "args": [${v}]}`,
      `{"parameters": ${v}}`,
    ];
    /** Path parameters: inference and method routes name what is deployed; routes that change state name nothing that is. */
    const fill = (path: string) =>
      path.replace(/\{(\w+)\}/g, (_, name: string) => {
        if (name === 'version') return r.pick(['1', '2', 'x'.repeat(300)]);
        if (name === 'method') return r.pick(['echo', 'generate', 'nope']);
        const serving = /^\/v2\/models\/|^\/api\/v1\/actors\/|\/jobs$/.test(path);
        return serving ? r.pick(['mlp', 'hostile', 'nope']) : `fz${r.int(3)}`;
      });
    let sent = 0;
    const statuses = new Map<number, number>();
    for (const [template, operations] of Object.entries(doc.paths)) {
      for (const method of Object.keys(operations)) {
        // DELETEs would remove what the rest of the run calls; the status stream never ends.
        if (method === 'delete' || template === '/api/v1/stream') continue;
        for (let i = 0; i < 4; i++) {
          const path = fill(template);
          const value = hostileJson(r);
          const query = method === 'get' ? `?q=${encodeURIComponent(value.slice(0, 4000))}` : '';
          const headers = { 'content-type': r.pick(['application/json', 'application/yaml']), ...CHAOS_AUTH };
          const body = method === 'get' ? undefined : r.pick(bodies(value));
          const res = await exchange(cluster.url, method.toUpperCase(), `${path}${query}`, headers, body);
          sent++;
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const text = res.text;
          const what = `${method.toUpperCase()} ${template} (${path.slice(0, 80)})`;
          if (res.status >= 500 && res.status !== 503 && res.status !== 504) problems.push(`${what}: ${res.status} ${text.slice(0, 200)}`);
          if (/TROUPE_ERR_INTERNAL/.test(text)) problems.push(`${what}: ${text.slice(0, 200)}`);
          // Readiness answers are a status alone, as the protocol has them.
          const bodiless = template.endsWith('/ready') && text === '';
          if (res.status >= 400 && !bodiless && !/"code":"TROUPE_ERR_[A-Z_]+"/.test(text))
            problems.push(`${what}: ${res.status} without a code: ${text.slice(0, 200)}`);
        }
        await healthz(`${method.toUpperCase()} ${template}`);
      }
    }

    // Server-sent events, each with a value nested 10,000 deep (a 20 KB body once took the head down).
    const deep = `${'['.repeat(10_000)}"a"${']'.repeat(10_000)}`;
    for (const [path, body] of [
      ['/v2/models/hostile/generate_stream', `{"text_input": ${deep}}`],
      ['/api/v1/actors/hostile/echo/stream', `{"args": [${deep}]}`],
      ['/v2/models/mlp/generate_stream', `{"x": ${deep}}`],
    ] as const) {
      const res = await fetch(`${cluster.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...CHAOS_AUTH },
        body,
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      // A class actor's arguments are refused as values that cannot cross; a model's input as a tensor.
      const code = path.startsWith('/v2/models/mlp') ? 'TROUPE_ERR_BAD_TENSOR' : 'TROUPE_ERR_UNSENDABLE_VALUE';
      if (res.status !== 400 || !text.includes(`"code":"${code}"`)) problems.push(`POST ${path}: ${res.status} ${text.slice(0, 200)}`);
      sent++;
      await healthz(`POST ${path}`);
    }

    // SDK frames: method calls and streams whose argument is nested deeper than any decoder
    // takes, or past the bounds; runs and deploys with hostile values in them.
    const socket = new RawSocket(`${wsBase}/v1/client`, CHAOS_AUTH, ['reply', 'streamItem']);
    await socket.opened;
    for (let i = 0; i < 60; i++) {
      if (!socket.open) break;
      const type = r.pick(['invoke', 'stream']);
      const depth = r.pick([65, 500, 3000, 100_000]);
      socket.send(
        packWithDeepArgument({ type, id: `deep-${i}`, actor: 'hostile', method: r.pick(['echo', 'generate']), credit: 4 }, depth),
        true,
      );
      const wide = Array.from({ length: r.pick([10, 5000, 60_000]) }, (_, k) => ({ k }));
      const large = 'x'.repeat(r.pick([10, 100_000, 900_000]));
      socket.send(pack([{ type: 'invoke', id: `wide-${i}`, actor: 'hostile', method: 'echo', args: [r.pick([wide, large])] }]), true);
      socket.send(pack([{ type: 'run', id: `run-${i}`, deployment: 'mlp', inputs: { x: r.pick([wide, large]) } }]), true);
      socket.send(
        pack([
          {
            type: 'deploy',
            id: `dep-${i}`,
            spec: { name: 'fz0', kind: 'class', model: 'test/fixtures/hostile.js#Hostile', args: [large] },
          },
        ]),
        true,
      );
      sent += 4;
      if (i % 10 === 9) await socket.probe(`deep-probe-${i}`);
    }
    if (socket.open) await socket.probe('deep-probe-end');
    problems.push(...socket.problems.map((p) => `/v1/client: ${p}`));
    socket.close();
    await healthz('the SDK frames');

    assert.deepEqual(problems.slice(0, 20), [], `${problems.length} improper answers`);
    for (const [role, pid] of Object.entries(pids)) assert.ok(isAlive(pid), `${role} (pid ${pid}) is still running`);
    process.stderr.write(
      `# deep, wide and large values (seed ${FUZZ_SEED + 47}): ${sent} requests and frames; HTTP ${JSON.stringify([...statuses])}\n`,
    );
  });
});
