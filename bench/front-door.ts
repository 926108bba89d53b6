// The front door's figures: `npm run bench:front-door`, also part of `npm run bench`. HTTP (the
// inference protocol, what curl, Triton's and KServe's clients send) against the same baselines
// in the same run: the simplest Node HTTP server around an in-process session (MLP), and raw
// onnxruntime-node at its best batch and layout (MobileNet), in alternating windows. The head is
// measured with its front-door workers (the default) and serving HTTP itself (--http-workers 0);
// gRPC (raw contents) beside them, through the workers and served by the head. Images and gRPC are
// loaded by h2load where installed (bench/lib/h2load.ts), else by autocannon and the grpc-js client.
// Two parts of their own: more in flight as more connections or as pipelined requests
// (front-door-connections.ts), and what receiving a request costs each protocol stack before any
// model (front-door-receive.ts). BENCH_ONLY=mlp,cnn,receive picks sections (and writes no file).
// Writes bench/RESULTS-front-door.md. Bounded: each load run lasts SECONDS (default 3).
import { writeFile } from 'node:fs/promises';
import { connect, tensor } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import type { TestCluster } from '../test/helpers/cluster.js';
import { baselineServer } from './lib/baseline-server.js';
import { connectionsSection } from './front-door-connections.js';
import { receiveCostSection } from './front-door-receive.js';
import { LAYOUTS, bestLayoutFloor, cnnInput } from './lib/cnn-floor.js';
import { measureFloor } from './lib/floor.js';
import { GRPC_GENERATOR, grpcLoad } from './lib/grpc-load.js';
import { IMAGE_LOAD_GENERATOR, httpLoad, imageLoad, oipRequest } from './lib/http-load.js';
import { closedLoop } from './lib/load.js';
import { cpuPerRequest } from './lib/process-cpu.js';
import { whenDoorsOpen } from './lib/doors.js';
import { socketReplicas } from './lib/socket-replicas.js';
import type { LoadResult } from './lib/load.js';
import { systemLine } from './lib/system.js';
import { fmt, loadTable } from './lib/table.js';
import { median, report } from './lib/report.js';

const SECONDS = Number(process.env.SECONDS ?? 3);
const ONLY = process.env.BENCH_ONLY?.split(',');
const wanted = (section: string) => !ONLY || ONLY.includes(section);
const WINDOWS = 5;
const { say, lines: out } = report();
type Row = { label: string; result: LoadResult; ratioTo?: number; ratioTo2?: number };

/** One line of CPU microseconds per request by kind of process, from a run measured with cpuPerRequest. */
function cpuLine(label: string, measured: { result: LoadResult; cpu: Map<string, number> }): string {
  const parts = [...measured.cpu]
    .filter(([name, us]) => name !== 'agent' && us >= 0.05)
    .map(([name, us]) => `${name} ${fmt(us, us < 10 ? 1 : 0)}`);
  const total = [...measured.cpu].filter(([name]) => name !== 'agent').reduce((a, [, us]) => a + us, 0);
  return `- ${label}, ${fmt(measured.result.rps)} req/s: ${parts.join(', ')} (all ${fmt(total)} µs a request)`;
}

const mlpX = new Float32Array(64).map((_, i) => Math.sin(i));
const image = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i));
const mlpInput = { name: 'x', shape: [1, 64], data: mlpX };
const imageInput = { name: 'image', shape: [1, 3, 224, 224], data: image };

async function deployMlp(cluster: TestCluster, batch: { maxSize: number }, replicas = 1): Promise<void> {
  const client = await connect(cluster.url);
  try {
    await client.update({ name: 'mlp', model: 'mlp.onnx', threads: 1, replicas, batch, maxQueue: 100_000 });
  } finally {
    await client.close();
  }
}

async function mlpSection(cluster: TestCluster, headOnly: TestCluster, handoff: TestCluster): Promise<void> {
  say('\n## Small MLP (input [1,64] float32), one replica, 1 intra-op thread\n');
  const f1 = await measureFloor(cluster.models.mlp, { name: 'x', shape: (b) => [b, 64] }, 1, 2, 1);
  say(`Raw onnxruntime-node in-process, batch 1: ${fmt(f1.callsPerSecond)} calls/s, p50 ${fmt(f1.p50Ms, 4)} ms.\n`);
  const rows: Row[] = [];
  const plain = await baselineServer(cluster.models.mlp, 'plain-http-server');
  const plainRps = new Map<number, number>();
  try {
    for (const c of [1, 16, 64, 256]) {
      const r = await httpLoad({ url: plain.url, method: 'POST', body: Buffer.from(mlpX.buffer) }, c, SECONDS);
      plainRps.set(c, r.rps);
      rows.push({ label: 'simplest Node HTTP server, in-process session (raw body)', result: r });
    }
  } finally {
    plain.stop();
  }
  // The same server batching with Troupe's window (64 rows, a run at once when idle): every ratio against both (issue 40).
  const batched = await baselineServer(cluster.models.mlp, 'batched-http-server');
  const batchedRps = new Map<number, number>();
  try {
    for (const c of [1, 16, 64, 256]) {
      const r = await httpLoad({ url: batched.url, method: 'POST', body: Buffer.from(mlpX.buffer) }, c, SECONDS);
      batchedRps.set(c, r.rps);
      rows.push({ label: 'simplest Node HTTP server, in-process session, batching 64 (one process)', result: r });
    }
  } finally {
    batched.stop();
  }
  const versus = (c: number) => plainRps.get(c) ?? NaN;
  const versusBatched = (c: number) => batchedRps.get(c) ?? NaN;
  const oip = (url: string, binary: boolean) => oipRequest(`${url}/v2/models/mlp/infer`, 'x', [1, 64], mlpX, 'logits', binary);
  for (const [label, maxSize] of [
    ['batching off', 1],
    ['batching maxSize 64', 64],
  ] as const) {
    await deployMlp(cluster, { maxSize });
    for (const c of [1, 16, 64, 256])
      rows.push({
        label: `Troupe HTTP OIP binary, front-door workers, ${label}`,
        result: await httpLoad(oip(cluster.url, true), c, SECONDS),
        ratioTo: versus(c),
        ratioTo2: versusBatched(c),
      });
  }
  for (const c of [16, 64, 256])
    rows.push({
      label: 'Troupe HTTP OIP JSON, front-door workers, batching maxSize 64',
      result: await httpLoad(oip(cluster.url, false), c, SECONDS),
      ratioTo: versus(c),
      ratioTo2: versusBatched(c),
    });
  await deployMlp(headOnly, { maxSize: 64 });
  for (const c of [1, 16, 64, 256])
    rows.push({
      label: 'Troupe HTTP OIP binary, served by the head (--http-workers 0), batching maxSize 64',
      result: await httpLoad(oip(headOnly.url, true), c, SECONDS),
      ratioTo: versus(c),
      ratioTo2: versusBatched(c),
    });
  const mlpGrpc = (c: TestCluster, concurrency: number) => grpcLoad(c.grpcAddress, 'mlp', c.models.mlp, mlpInput, concurrency, SECONDS);
  for (const c of [1, 16, 64, 256])
    rows.push({
      label: `Troupe gRPC raw contents, front-door workers, batching maxSize 64 (load: ${GRPC_GENERATOR})`,
      result: await mlpGrpc(cluster, c),
      ratioTo: versus(c),
      ratioTo2: versusBatched(c),
    });
  for (const c of [1, 16, 64, 256])
    rows.push({
      label: `Troupe gRPC raw contents, served by the head (--http-workers 0), batching maxSize 64 (load: ${GRPC_GENERATOR})`,
      result: await mlpGrpc(headOnly, c),
      ratioTo: versus(c),
      ratioTo2: versusBatched(c),
    });
  for (const replicas of [1, 2]) {
    await deployMlp(handoff, { maxSize: 64 }, replicas);
    await whenDoorsOpen(handoff.url, 'mlp', replicas, oip(handoff.url, true));
    const label = `Troupe HTTP OIP binary, replicas serve HTTP (--http-handoff), ${replicas} replica${replicas > 1 ? 's' : ''}, batching maxSize 64`;
    for (const c of [1, 16, 64, 256])
      rows.push({ label, result: await httpLoad(oip(handoff.url, true), c, SECONDS), ratioTo: versus(c), ratioTo2: versusBatched(c) });
  }
  for (const c of [16, 64, 256])
    rows.push({
      label: 'Troupe HTTP OIP JSON, replicas serve HTTP (--http-handoff), 2 replicas, batching maxSize 64',
      result: await httpLoad(oip(handoff.url, false), c, SECONDS),
      ratioTo: versus(c),
      ratioTo2: versusBatched(c),
    });
  say(loadTable(rows).replace('vs floor', 'vs simplest server').replace('vs second', 'vs batched simplest server'));
  // Issue 24's bar: gRPC raw contents at 64 in flight at least HTTP binary's, on the same path.
  const at64 = (prefix: string) => rows.find((r) => r.label.startsWith(prefix) && r.result.concurrency === 64)?.result.rps ?? NaN;
  const grpcVsHttp = (grpc: number, http: number) => `${fmt(grpc)} / ${fmt(http)} req/s (${fmt(grpc / http, 2)}x)`;
  say(
    `\ngRPC raw contents against HTTP binary at 64 in flight, batching maxSize 64: front-door workers ${grpcVsHttp(at64('Troupe gRPC raw contents, front-door workers'), at64('Troupe HTTP OIP binary, front-door workers, batching maxSize 64'))}; served by the head ${grpcVsHttp(at64('Troupe gRPC raw contents, served by the head'), at64('Troupe HTTP OIP binary, served by the head'))}.`,
  );
  // Where the CPU goes at 64 in flight: µs of each kind of process per request ('client' is the
  // load generator, this process). The two cores are the budget every path shares.
  say('\nCPU per request at 64 in flight, µs by process (client: the load generator):\n');
  const plainAgain = await baselineServer(cluster.models.mlp, 'plain-http-server');
  try {
    say(
      cpuLine(
        'simplest Node HTTP server',
        await cpuPerRequest(
          () => httpLoad({ url: plainAgain.url, method: 'POST', body: Buffer.from(mlpX.buffer) }, 64, SECONDS),
          (r) => r.requests,
        ),
      ),
    );
  } finally {
    plainAgain.stop();
  }
  say(
    cpuLine(
      'Troupe HTTP OIP binary, front-door workers, batching maxSize 64',
      await cpuPerRequest(
        () => httpLoad(oip(cluster.url, true), 64, SECONDS),
        (r) => r.requests,
      ),
    ),
  );
  for (const [label, at] of [
    ['front-door workers', cluster],
    ['served by the head (--http-workers 0)', headOnly],
  ] as const)
    say(
      cpuLine(
        `Troupe gRPC raw contents, ${label}, batching maxSize 64 (load: ${GRPC_GENERATOR})`,
        await cpuPerRequest(
          () => mlpGrpc(at, 64),
          (r) => r.requests,
        ),
      ),
    );
  say(
    cpuLine(
      'Troupe HTTP OIP binary, replicas serve HTTP (--http-handoff), 2 replicas, batching maxSize 64',
      await cpuPerRequest(
        () => httpLoad(oip(handoff.url, true), 64, SECONDS),
        (r) => r.requests,
      ),
    ),
  );
  const sdk = await connect(cluster.url);
  const x = tensor('float32', [1, 64], mlpX);
  try {
    say(
      cpuLine(
        'Troupe SDK straight to the replica, batching maxSize 64',
        await cpuPerRequest(
          () => closedLoop(() => sdk.run('mlp', { x }), { concurrency: 64, seconds: SECONDS }),
          (r) => r.requests,
        ),
      ),
    );
  } finally {
    await sdk.close();
  }
  // The batching policy (actors/batcher.ts): a call that finds its replica idle runs at once. The
  // old policy, the first call of a batch waiting up to maxDelayMs for company, is still there as
  // batch.waitWhenIdle: measured in the same run, over the SDK, to compare the two.
  say('\nBatching policy, SDK straight to the replica (maxSize 64), req/s and p50:\n');
  const policyRows: Row[] = [];
  const policyClient = await connect(cluster.url);
  const px = tensor('float32', [1, 64], mlpX);
  try {
    for (const [label, batch] of [
      ['runs at once when idle (default), maxDelayMs 2', { maxSize: 64, maxDelayMs: 2 }],
      ['waits for company (waitWhenIdle), maxDelayMs 2', { maxSize: 64, maxDelayMs: 2, waitWhenIdle: true }],
      ['batching off', { maxSize: 1 }],
    ] as const) {
      await policyClient.update({ name: 'policy', model: 'mlp.onnx', threads: 1, batch, maxQueue: 100_000 });
      for (const c of [1, 64])
        policyRows.push({
          label,
          result: await closedLoop(() => policyClient.run('policy', { x: px }), { concurrency: c, seconds: SECONDS }),
        });
    }
    await policyClient.undeploy('policy');
  } finally {
    await policyClient.close();
  }
  say(loadTable(policyRows));
  const p50 = (label: string) => rows.find((r) => r.label.endsWith(label) && r.result.concurrency === 1)?.result.p50Ms ?? NaN;
  say(
    `\nConcurrency 1, p50: batching maxSize 64 ${fmt(p50('front-door workers, batching maxSize 64'), 3)} ms, batching off ${fmt(p50('front-door workers, batching off'), 3)} ms (difference ${fmt(p50('front-door workers, batching maxSize 64') - p50('front-door workers, batching off'), 3)} ms).`,
  );
  await deployMlp(handoff, { maxSize: 64 }, 1);
  await connectionsSection({ handoffUrl: handoff.url, mlpPath: cluster.models.mlp, mlpX, seconds: SECONDS, say });
}

async function cnnSection(cluster: TestCluster, headOnly: TestCluster, handoff: TestCluster): Promise<void> {
  say('\n## MobileNet-v2-shaped CNN (input [1,3,224,224], 588 KiB a request), HTTP OIP binary\n');
  const floors: { batch: number; best: number; rows: number[] }[] = [];
  for (const batch of [1, 2, 4, 8]) floors.push({ batch, ...(await bestLayoutFloor(cluster.models.mobilenet, batch, 2)) });
  const floor = floors.reduce((a, b) => (b.best > a.best ? b : a));
  say(
    `Floor, raw onnxruntime-node, samples/s (1 process x 2 threads / 2 processes x 1 thread): ${floors.map((f) => `batch ${f.batch}: ${f.rows.map((r) => fmt(r, 1)).join(' / ')}`).join('; ')}. Best batch: ${floor.batch}.\n`,
  );
  const request = (url: string) => oipRequest(`${url}/v2/models/cnn/infer`, 'image', [1, 3, 224, 224], image, 'logits', true);
  say(
    `Alternating windows (2 s each; batching maxSize ${floor.batch}; HTTP load from ${IMAGE_LOAD_GENERATOR} unless named), samples/s: floor's best layout at batch ${floor.batch} / Troupe HTTP at 16 in flight / at 64 in flight / served by the head (--http-workers 0) at 16 / gRPC raw contents (load: ${GRPC_GENERATOR}) through the front-door workers at 16 / served by the head at 16 / replicas serve HTTP (--http-handoff) at 16 / at 64 / bare socket replicas at 16, each image sent over a socket from this process / replicas serve HTTP, load from autocannon (a Node client), at 16 / at 64:\n`,
  );
  // Beside the floor's two layouts, one replica holding two instances of one thread each.
  const layouts: { replicas: number; threads: number; instances?: number }[] = [...LAYOUTS, { replicas: 1, threads: 1, instances: 2 }];
  for (const layout of layouts) {
    const spec = {
      name: 'cnn',
      model: 'mobilenet.onnx',
      threads: layout.threads,
      replicas: layout.replicas,
      ...(layout.instances ? { instances: layout.instances } : {}),
      batch: { maxSize: floor.batch },
      maxQueue: 100_000,
    };
    for (const c of [cluster, headOnly, handoff]) {
      const client = await connect(c.url);
      await client.update(spec).finally(() => client.close());
    }
    await whenDoorsOpen(handoff.url, 'cnn', layout.replicas, request(handoff.url));
    const ratios = {
      c16: [] as number[],
      c64: [] as number[],
      head16: [] as number[],
      grpc16: [] as number[],
      grpcHead16: [] as number[],
      door16: [] as number[],
      door64: [] as number[],
      bare: [] as number[],
      autocannon16: [] as number[],
      autocannon64: [] as number[],
    };
    const windows: string[] = [];
    // Bare replicas have no instances: two processes stand for a replica's two sessions.
    const bareProcesses = layout.replicas * (layout.instances ?? 1);
    const bare = await socketReplicas(cluster.models.mobilenet, cnnInput.name, cnnInput.shape(1).slice(1), layout.threads, bareProcesses);
    try {
      for (let i = 0; i < WINDOWS; i++) {
        const f = await bestLayoutFloor(cluster.models.mobilenet, floor.batch, 2);
        const r16 = await imageLoad(request(cluster.url), 16, 2);
        const r64 = await imageLoad(request(cluster.url), 64, 2);
        const h16 = await imageLoad(request(headOnly.url), 16, 2);
        const g16 = await grpcLoad(cluster.grpcAddress, 'cnn', cluster.models.mobilenet, imageInput, 16, 2);
        const gh16 = await grpcLoad(headOnly.grpcAddress, 'cnn', headOnly.models.mobilenet, imageInput, 16, 2);
        const d16 = await imageLoad(request(handoff.url), 16, 2);
        const d64 = await imageLoad(request(handoff.url), 64, 2);
        const b16 = await closedLoop(() => bare.call(image), { concurrency: 16, seconds: 2 });
        const a16 = IMAGE_LOAD_GENERATOR === 'autocannon' ? d16 : await httpLoad(request(handoff.url), 16, 2);
        const a64 = IMAGE_LOAD_GENERATOR === 'autocannon' ? d64 : await httpLoad(request(handoff.url), 64, 2);
        ratios.c16.push(r16.rps / f.best);
        ratios.c64.push(r64.rps / f.best);
        ratios.head16.push(h16.rps / f.best);
        ratios.grpc16.push(g16.rps / f.best);
        ratios.grpcHead16.push(gh16.rps / f.best);
        ratios.door16.push(d16.rps / f.best);
        ratios.door64.push(d64.rps / f.best);
        ratios.bare.push(b16.rps / f.best);
        ratios.autocannon16.push(a16.rps / f.best);
        ratios.autocannon64.push(a64.rps / f.best);
        const autocannonErrors = IMAGE_LOAD_GENERATOR === 'autocannon' ? 0 : a16.errors + a64.errors;
        const errors = r16.errors + r64.errors + h16.errors + g16.errors + gh16.errors + d16.errors + d64.errors + autocannonErrors;
        windows.push(
          `${[f.best, r16.rps, r64.rps, h16.rps, g16.rps, gh16.rps, d16.rps, d64.rps, b16.rps, a16.rps, a64.rps].map((v) => fmt(v, 1)).join(' / ')}${errors > 0 ? ` (errors ${errors})` : ''}`,
        );
      }
    } finally {
      bare.stop();
    }
    for (const c of [cluster, headOnly, handoff]) {
      const client = await connect(c.url);
      await client.undeploy('cnn').finally(() => client.close());
    }
    const instances = layout.instances ? ` x ${layout.instances} instances` : '';
    say(
      `- ${layout.replicas} replica${layout.replicas > 1 ? 's' : ''}${instances} x ${layout.threads} thread${layout.threads > 1 ? 's' : ''}: ${windows.join('; ')}.`,
    );
    say(
      `  Medians over the floor: HTTP, 16 in flight ${fmt(median(ratios.c16), 2)}x; 64 in flight ${fmt(median(ratios.c64), 2)}x; served by the head, 16 in flight ${fmt(median(ratios.head16), 2)}x; gRPC, 16 in flight ${fmt(median(ratios.grpc16), 2)}x, served by the head ${fmt(median(ratios.grpcHead16), 2)}x; replicas serve HTTP, 16 in flight ${fmt(median(ratios.door16), 2)}x, 64 in flight ${fmt(median(ratios.door64), 2)}x; bare socket replicas ${fmt(median(ratios.bare), 2)}x; replicas serve HTTP, load from autocannon, 16 in flight ${fmt(median(ratios.autocannon16), 2)}x, 64 in flight ${fmt(median(ratios.autocannon64), 2)}x.`,
    );
  }
  // Where the CPU goes, 2 replicas x 1 thread, 16 in flight.
  const client = await connect(cluster.url);
  try {
    await client.update({
      name: 'cnn',
      model: 'mobilenet.onnx',
      threads: 1,
      replicas: 2,
      batch: { maxSize: floor.batch },
      maxQueue: 100_000,
    });
    say('\nCPU per image, 2 replicas x 1 thread, 16 in flight, µs by process (client: the load generator):\n');
    say(
      cpuLine(
        'Troupe HTTP OIP binary, front-door workers',
        await cpuPerRequest(
          () => imageLoad(request(cluster.url), 16, SECONDS),
          (r) => r.requests,
        ),
      ),
    );
    say(
      cpuLine(
        `Troupe gRPC raw contents, front-door workers (load: ${GRPC_GENERATOR})`,
        await cpuPerRequest(
          () => grpcLoad(cluster.grpcAddress, 'cnn', cluster.models.mobilenet, imageInput, 16, SECONDS),
          (r) => r.requests,
        ),
      ),
    );
    const x = tensor('float32', [1, 3, 224, 224], image);
    say(
      cpuLine(
        'Troupe SDK, images through shared memory',
        await cpuPerRequest(
          () => closedLoop(() => client.run('cnn', { image: x }), { concurrency: 16, seconds: SECONDS }),
          (r) => r.requests,
        ),
      ),
    );
    await client.undeploy('cnn');
  } finally {
    await client.close();
  }
  const doors = await connect(handoff.url);
  try {
    await doors.update({
      name: 'cnn',
      model: 'mobilenet.onnx',
      threads: 1,
      replicas: 2,
      batch: { maxSize: floor.batch },
      maxQueue: 100_000,
    });
    await whenDoorsOpen(handoff.url, 'cnn', 2, request(handoff.url));
    say(
      cpuLine(
        'Troupe HTTP OIP binary, replicas serve HTTP (--http-handoff)',
        await cpuPerRequest(
          () => imageLoad(request(handoff.url), 16, SECONDS),
          (r) => r.requests,
        ),
      ),
    );
    await doors.undeploy('cnn');
  } finally {
    await doors.close();
  }
  const bare = await socketReplicas(cluster.models.mobilenet, cnnInput.name, cnnInput.shape(1).slice(1), 1, 2);
  try {
    say(
      cpuLine(
        'bare socket replicas, images sent',
        await cpuPerRequest(
          () => closedLoop(() => bare.call(image), { concurrency: 16, seconds: SECONDS }),
          (r) => r.requests,
        ),
      ),
    );
  } finally {
    bare.stop();
  }
}

const agents = [['--name', 'bench', '--cpus', '64']];
// The workers' cluster: a lone replica would otherwise serve HTTP itself (the default since issue 43).
const cluster = await startCluster({ agents, headArgs: ['--no-http-handoff'] });
const headOnly = await startCluster({ agents, headArgs: ['--http-workers', '0'] });
const handoff = await startCluster({ agents, headArgs: ['--http-handoff'] });
try {
  say('# Front door: HTTP against its baselines\n');
  say(systemLine('bench:front-door', 'bench/front-door.ts'));
  say(
    `- each load run: ${SECONDS} s closed loop after an unmeasured warm-up; load generator (HTTP: autocannon, undici at concurrency 1, images: ${IMAGE_LOAD_GENERATOR}; gRPC: ${GRPC_GENERATOR}, one HTTP/2 connection, answers checked on a sample first) in the same machine, sharing its cores; three clusters up: front-door workers (--no-http-handoff), none (--http-workers 0), and replicas serving HTTP (--http-handoff); HTTP latencies at concurrency above 1 from autocannon are whole milliseconds (bench/RESULTS-first-deploy.md: a microsecond client throughout)`,
  );
  if (wanted('mlp')) await mlpSection(cluster, headOnly, handoff);
  if (wanted('cnn')) await cnnSection(cluster, headOnly, handoff);
  if (wanted('receive')) await receiveCostSection(mlpX, image, SECONDS, say);
} finally {
  await cluster.stop();
  await headOnly.stop();
  await handoff.stop();
}
if (!ONLY) await writeFile(new URL('../../bench/RESULTS-front-door.md', import.meta.url), `${out.join('\n')}\n`);
