import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { copyFile, writeFile } from 'node:fs/promises';
import { freePort } from '../../test/helpers/free-port.js';
import { join } from 'node:path';
import { Client } from 'undici';
import { model, pipeline } from '../../runtime/internal.js';
import { startCluster } from '../../test/helpers/cluster.js';
import { REPO } from '../../test/helpers/python-clients.js';
import { oipRequest } from '../lib/http-load.js';
import type { HttpRequest } from '../lib/http-load.js';
import { processTree } from '../lib/process-tree.js';

/** The bench's model files (bench/peers/main.ts writes them from models/). */
export interface ModelFiles {
  dir: string;
  mlp: string;
  mobilenet: string;
  /** The pipeline's first step: an MLP [N,64] -> [N,64]; the second is the MLP. */
  link: string;
}

/** A system serving the three models, started, with what the load generators send it. */
export interface Served {
  /** Seconds from the first process spawned to the first MLP answer, every model configured. */
  firstAnswerS: number;
  /** The processes whose trees hold everything it runs. */
  roots: number[];
  mlp: HttpRequest;
  cnn: HttpRequest;
  /** The two-step pipeline's request, or why the system has none. */
  pipe: HttpRequest | string;
  /** host:port of its Open Inference Protocol endpoints, for perf_analyzer. */
  oip?: { http: string; grpc: string };
  stop(): Promise<void>;
}

export interface System {
  name: string;
  /** How it is configured, and why that is its best on two cores. */
  config: string;
  start(files: ModelFiles): Promise<Served>;
}

export const VENVS = join(REPO, '.venv-peers');
const PEERS_DIR = join(REPO, 'bench', 'peers');
const X = new Float32Array(64).map((_, i) => Math.sin(i));
const IMAGE = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i));
const raw = (data: Float32Array) => Buffer.from(data.buffer, data.byteOffset, data.byteLength);

/** Sends `request` until it is answered 200 (bounded); resolves with the moment it was. */
async function firstAnswer(request: HttpRequest, timeoutMs: number, exited: () => string | undefined): Promise<number> {
  const url = new URL(request.url);
  const deadline = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    const gone = exited();
    if (gone) throw new Error(gone);
    const client = new Client(url.origin);
    try {
      const answer = await client.request({ path: url.pathname, method: 'POST', headers: request.headers, body: request.body });
      const body = await answer.body.text();
      if (answer.statusCode === 200) return performance.now();
      last = `${answer.statusCode} ${body.slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    } finally {
      await client.close();
    }
    if (Date.now() > deadline) throw new Error(`no answer from ${request.url} within ${timeoutMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A Python server in its own process tree; stopped with SIGTERM, then SIGKILL for what is left. */
function python(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): { child: ChildProcess; exited: () => string | undefined; stop: () => Promise<void> } {
  const child = spawn(command, args, { cwd: PEERS_DIR, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  let exit: string | undefined;
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  child.once('exit', (code, signal) => {
    exit = `${command} exited (${code ?? signal}) before answering: ${stderr.trim().split('\n').slice(-3).join(' | ')}`;
  });
  return {
    child,
    exited: () => exit,
    async stop() {
      const tree = await processTree([child.pid!]);
      if (exit === undefined) {
        child.kill('SIGTERM');
        await Promise.race([new Promise((r) => child.once('exit', r)), new Promise((r) => setTimeout(r, 30_000))]);
      }
      for (const pid of tree)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
    },
  };
}

const bin = (venv: string, name: string) => join(VENVS, venv, 'bin', name);

function oip(base: string): { mlp: HttpRequest; cnn: HttpRequest; pipe: HttpRequest } {
  return {
    mlp: oipRequest(`${base}/v2/models/mlp/infer`, 'x', [1, 64], X, 'logits', true),
    cnn: oipRequest(`${base}/v2/models/cnn/infer`, 'image', [1, 3, 224, 224], IMAGE, 'logits', true),
    pipe: oipRequest(`${base}/v2/models/pipe/infer`, 'x', [1, 64], X, 'logits', true),
  };
}

/** Troupe with a head and one agent, the three models deployed over HTTP as `specs` says. */
function troupe(name: string, config: string, headArgs: string[], specs: (files: ModelFiles) => Promise<Record<string, unknown>>): System {
  return {
    name,
    config,
    async start(files) {
      const start = performance.now();
      const cluster = await startCluster({ headArgs });
      await copyFile(files.link, join(cluster.modelDir, 'link.onnx'));
      const deployments = await specs({ ...files, dir: cluster.modelDir });
      await Promise.all(
        Object.entries(deployments).map(async ([deployment, spec]) => {
          const answer = await fetch(`${cluster.url}/api/v1/deployments/${deployment}`, {
            method: 'PUT',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(spec),
          });
          if (answer.status >= 300) throw new Error(`deploying ${deployment}: ${answer.status} ${await answer.text()}`);
        }),
      );
      const requests = oip(cluster.url);
      const at = await firstAnswer(requests.mlp, 60_000, () => undefined);
      return {
        firstAnswerS: (at - start) / 1000,
        roots: [cluster.head.process.pid!, ...cluster.agents.map((a) => a.process.pid!)],
        ...requests,
        oip: { http: new URL(cluster.url).host, grpc: cluster.grpcAddress },
        stop: () => cluster.stop(),
      };
    },
  };
}

// Every deployment asks for half a CPU: the agent offers its 2 cores, and at the default of one
// CPU each the third of the four models stays PENDING, saying it does not fit.
const linkPipeline = (cpus?: number) =>
  pipeline('pipe', [
    model('step1', { path: 'link.onnx', ...(cpus ? { cpus } : {}) }),
    model('step2', { path: 'mlp.onnx', ...(cpus ? { cpus } : {}) }),
  ]);

export const TROUPE_FIRST = troupe(
  'Troupe, as first deployed',
  "a head and one agent as `troupe head` / `troupe agent` start them; each model deployed with no options but `cpus: 0.5` (at the default of 1 CPU the third of the four models does not fit the 2 cores and stays PENDING; so named, no model gets the replicas a model alone is given at load): one replica of one thread each, no batching (a spec that names its CPUs leaves no layout to the replica to choose), and each model's one replica serving its HTTP connections itself, handed over by the head (the default for a model with one replica); the pipeline a graph on the head",
  [],
  async () => ({ mlp: { model: 'mlp.onnx', cpus: 0.5 }, cnn: { model: 'mobilenet.onnx', cpus: 0.5 }, pipe: linkPipeline(0.5) }),
);

export const TROUPE_ADVISED = troupe(
  'Troupe, as docs/performance.md advises',
  'head with `--http-handoff` (replicas serve their HTTP connections); MLP: 1 replica x 1 thread, batching maxSize 64; MobileNet: 2 replicas x 1 thread, batching maxSize 4 (2 ms); the pipeline a graph file served by one actor (docs/graphs.md), 1 thread, batching maxSize 64',
  ['--http-handoff'],
  async (files) => {
    await writeFile(join(files.dir, 'pipe.graph.json'), JSON.stringify(linkPipeline()));
    return {
      mlp: { model: 'mlp.onnx', cpus: 0.5, threads: 1, batch: { maxSize: 64 } },
      cnn: { model: 'mobilenet.onnx', cpus: 0.5, replicas: 2, threads: 1, batch: { maxSize: 4, maxDelayMs: 2 } },
      pipe: { model: 'pipe.graph.json', cpus: 0.5, threads: 1, batch: { maxSize: 64 } },
    };
  },
);

export const KSERVE: System = {
  name: 'KServe ModelServer',
  config:
    'kserve 0.21 ModelServer, one per host as its docs run it outside Kubernetes, 2 uvicorn workers (REST; one per core), gRPC on the main process, one onnxruntime session of 1 thread per model per worker, `predict` synchronous as in its custom-model docs; no batching (its batcher is a Kubernetes sidecar, not part of the ModelServer); the pipeline is its transformer -> predictor form: a second ModelServer whose preprocess runs the first step and sends the result to the predictor over REST',
  async start(files) {
    const [http, grpc, pipeHttp, pipeGrpc] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const start = performance.now();
    const predictor = python(
      bin('kserve', 'python'),
      ['kserve_server.py', 'predictor', String(http), String(grpc), files.mlp, files.mobilenet, '2'],
      {},
    );
    const transformer = python(
      bin('kserve', 'python'),
      ['kserve_server.py', 'transformer', String(pipeHttp), String(pipeGrpc), files.link, `127.0.0.1:${http}`],
      {},
    );
    const requests = oip(`http://127.0.0.1:${http}`);
    const pipe = oip(`http://127.0.0.1:${pipeHttp}`).pipe;
    const stop = async () => {
      await Promise.all([predictor.stop(), transformer.stop()]);
    };
    try {
      const at = await firstAnswer(requests.mlp, 180_000, predictor.exited);
      await firstAnswer(pipe, 180_000, transformer.exited);
      return {
        firstAnswerS: (at - start) / 1000,
        roots: [predictor.child.pid!, transformer.child.pid!],
        ...requests,
        pipe,
        oip: { http: `127.0.0.1:${http}`, grpc: `127.0.0.1:${grpc}` },
        stop,
      };
    } catch (err) {
      await stop();
      throw err;
    }
  },
};

export const RAY: System = {
  name: 'Ray Serve',
  config:
    "ray[serve] 2.60 on a local Ray of num_cpus=2 (no dashboard); MLP and MobileNet: 2 replicas each (one per core), `@serve.batch` (MLP max_batch_size 32, 2 ms; MobileNet 4, 5 ms), max_ongoing_requests 64 / 16 so batches fill, one onnxruntime session of 1 thread per replica; requests carry the tensor's raw bytes (Ray Serve has no tensor protocol); the pipeline is model composition: an ingress deployment calling two deployments through DeploymentHandles",
  async start(files) {
    const port = await freePort();
    const start = performance.now();
    const server = python(bin('ray', 'python'), ['ray_serve.py', String(port), files.mlp, files.mobilenet, files.link], {
      RAY_USAGE_STATS_ENABLED: '0',
    });
    const base = `http://127.0.0.1:${port}`;
    const bytes = (path: string, data: Float32Array): HttpRequest => ({
      url: `${base}${path}`,
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: raw(data),
    });
    const requests = { mlp: bytes('/mlp', X), cnn: bytes('/cnn', IMAGE), pipe: bytes('/pipe', X) };
    try {
      const at = await firstAnswer(requests.mlp, 300_000, server.exited);
      await firstAnswer(requests.pipe, 120_000, server.exited);
      return { firstAnswerS: (at - start) / 1000, roots: [server.child.pid!], ...requests, stop: server.stop };
    } catch (err) {
      await server.stop();
      throw err;
    }
  },
};

export const BENTOML: System = {
  name: 'BentoML',
  config:
    'bentoml 1.4 `bentoml serve`, one server per service; MLP and MobileNet: 2 workers each (one per core), adaptive batching (batchable APIs, MLP max_batch_size 64, MobileNet 4), one onnxruntime session of 1 thread per worker; requests in its JSON IO (an ndarray input is a JSON array); the pipeline is service composition: a service calling two services it depends on (bentoml.depends), each in its own process',
  async start(files) {
    const [mlpPort, cnnPort, pipePort] = [await freePort(), await freePort(), await freePort()];
    const env = { PEER_MLP: files.mlp, PEER_CNN: files.mobilenet, PEER_LINK: files.link, BENTOML_DO_NOT_TRACK: 'True' };
    const start = performance.now();
    const serve = (service: string, port: number) =>
      python(bin('bentoml', 'bentoml'), ['serve', `bentoml_service:${service}`, '--host', '127.0.0.1', '--port', String(port)], env);
    const servers = [serve('Mlp', mlpPort), serve('Cnn', cnnPort), serve('Pipe', pipePort)];
    const json = (port: number, rows: unknown): HttpRequest => ({
      url: `http://127.0.0.1:${port}/predict`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ x: rows }),
    });
    const image = [
      [0, 1, 2].map((c) => Array.from({ length: 224 }, (_, h) => Array.from(IMAGE.subarray((c * 224 + h) * 224, (c * 224 + h + 1) * 224)))),
    ];
    const requests = { mlp: json(mlpPort, [Array.from(X)]), cnn: json(cnnPort, image), pipe: json(pipePort, [Array.from(X)]) };
    const stop = async () => {
      await Promise.all(servers.map((s) => s.stop()));
    };
    try {
      const at = await firstAnswer(requests.mlp, 180_000, servers[0]!.exited);
      await firstAnswer(requests.cnn, 180_000, servers[1]!.exited);
      await firstAnswer(requests.pipe, 180_000, servers[2]!.exited);
      return { firstAnswerS: (at - start) / 1000, roots: servers.map((s) => s.child.pid!), ...requests, stop };
    } catch (err) {
      await stop();
      throw err;
    }
  },
};
