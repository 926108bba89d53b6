import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { DEFAULT_DRAIN_MS } from '../head/index.js';
import { writeExampleModels } from '../models/index.js';
import { TroupeError, connect, readPem, tensor } from '../runtime/internal.js';
import type { Tensor } from '../runtime/internal.js';
import { startChild, stopChild } from './children.js';
import { PortSchema, helpOf, onShutdown, parseFlags, specOf } from './flags.js';
import type { FlagDef } from './flags.js';

export const UP_FLAGS: readonly FlagDef[] = [
  { name: 'port', value: 'PORT', help: 'head port, 0 for any (default 8470, or TROUPE_PORT)' },
  {
    name: 'grpc-port',
    value: 'PORT',
    help: 'gRPC inference port, 0 for any (default: PORT+1, so 8471; or\nTROUPE_GRPC_PORT; 0 when --port is 0)',
  },
  { name: 'no-grpc', help: 'serve no gRPC endpoint' },
  { name: 'data-dir', value: 'DIR', help: 'where example models (DIR/models) and uploads (DIR/head) go (default ./.troupe)' },
  { name: 'simulate-gpus', value: 'N', help: 'give the local agent N simulated GPUs (default 0)' },
  {
    name: 'http-handoff',
    help: "every replica serves its deployment's HTTP inference connections\nitself (troupe head --http-handoff; by default only a model's lone\nreplica does; docs/front-door.md)",
  },
  { name: 'no-http-handoff', help: 'the front-door workers serve every inference connection' },
  { name: 'tls-cert', value: 'FILE', help: 'run the cluster over TLS with this certificate (troupe head --tls-cert)' },
  { name: 'tls-key', value: 'FILE', help: 'the private key of --tls-cert' },
  { name: 'tls-ca', value: 'FILE', help: 'the CA that signed --tls-cert, which the agent and up itself verify it with' },
];

export const UP_HELP = helpOf(
  'troupe up: an embedded cluster (head + one local agent) with an example model deployed',
  [],
  UP_FLAGS,
  "The local agent runs fn steps from the compiled examples' folder only (e.g. 'ensemble/steps.js#standardize').",
);

export const UpFlagsSchema = z.object({
  port: PortSchema.default(Number(process.env.TROUPE_PORT ?? 8470)),
  grpcPort: PortSchema.optional(),
  noGrpc: z.boolean().optional(),
  dataDir: z.string().min(1).default('.troupe'),
  simulateGpus: z.coerce.number().int('must be a whole number').min(0).max(64).default(0),
  httpHandoff: z.boolean().optional(),
  noHttpHandoff: z.boolean().optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  tlsCa: z.string().min(1).optional(),
});

/** The compiled examples (dist/examples/): the only modules fn steps of `troupe up` may name. */
export const EXAMPLES_DIR = fileURLToPath(new URL('../examples/', import.meta.url));

/** A deterministic sample row, so the printed result is the same on every machine. */
function sampleInput(): Tensor {
  const x = new Float32Array(64);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i) / 2;
  return tensor('float32', [1, 64], x);
}

export async function upCommand(argv: string[]): Promise<void> {
  const flags = parseFlags('up', argv, specOf(UP_FLAGS), UpFlagsSchema);
  if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined) || (flags.tlsCa !== undefined && flags.tlsCert === undefined))
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'up: --tls-cert and --tls-key go together, and --tls-ca needs them');
  const tlsArgs = flags.tlsCert && flags.tlsKey ? ['--tls-cert', resolve(flags.tlsCert), '--tls-key', resolve(flags.tlsKey)] : [];
  const caArgs = flags.tlsCa ? ['--tls-ca', resolve(flags.tlsCa)] : [];
  // Read before anything starts, so a bad file is said once, naming up's own flag.
  const ca = flags.tlsCa ? readPem('--tls-ca', flags.tlsCa) : undefined;
  // At a terminal a person reads the few lines up prints itself; the processes under it say only
  // what needs attention (warnings, errors) unless TROUPE_LOG_LEVEL asks for more. Piped, every
  // line is kept, for whatever reads them.
  if (process.stdout.isTTY && process.env.TROUPE_LOG_LEVEL === undefined) process.env.TROUPE_LOG_LEVEL = 'warn';
  const modelDir = resolve(flags.dataDir, 'models');
  await writeExampleModels(modelDir);

  const head = startChild(
    [
      'head',
      '--port',
      String(flags.port),
      '--data-dir',
      resolve(flags.dataDir, 'head'),
      ...(flags.grpcPort !== undefined ? ['--grpc-port', String(flags.grpcPort)] : []),
      ...(flags.noGrpc ? ['--no-grpc'] : []),
      ...(flags.httpHandoff ? ['--http-handoff'] : []),
      ...(flags.noHttpHandoff ? ['--no-http-handoff'] : []),
      ...tlsArgs,
    ],
    /listening on (\S+(?: and gRPC on \S+)?)/,
    30_000,
    process.env,
    // What an earlier session left in the data directory comes back: say so (cli/head.ts).
    { echo: /^restored from / },
  );
  const children = [head];
  let stopping = false;
  const stopAll = async () => {
    stopping = true;
    // The head first: it refuses new calls and finishes those it accepted (within its drain, 10 s)
    // while the agent's actors still run them; then the agent, which stops its actors. Stopped the
    // other way round, the calls in flight had no replica left and waited out the whole drain.
    await stopChild(head, DEFAULT_DRAIN_MS + 5_000);
    for (const child of children.slice(1)) await stopChild(child, 10_000);
  };
  onShutdown(stopAll);
  for (const c of children) void c.exited.then(() => !stopping && process.kill(process.pid, 'SIGTERM'));

  const [url = '', grpcAddress] = (await head.line).split(' and gRPC on ');
  // fn steps are opt-in code: the embedded agent offers the examples' steps and nothing else.
  // Its list of running actors under --data-dir too: the temp folder default is shared by every
  // `troupe up` on the host, and one's list is no other's business.
  const agentArgs = [
    'agent',
    '--head',
    url,
    '--name',
    'local',
    '--model-dir',
    modelDir,
    '--module-dir',
    EXAMPLES_DIR,
    '--state-dir',
    resolve(flags.dataDir, 'agent'),
    ...caArgs,
  ];
  if (flags.simulateGpus > 0) agentArgs.push('--simulate-gpus', String(flags.simulateGpus));
  // In a process group of its own (its actors with it): a terminal's Ctrl-C reaches up, the head
  // and the head's workers, and the agent is stopped once the head has drained.
  const agent = startChild(agentArgs, /joined/, 30_000, process.env, { ownGroup: true });
  children.push(agent);
  void agent.exited.then(() => !stopping && process.kill(process.pid, 'SIGTERM'));
  await agent.line;

  const cluster = await connect(url, ca ? { tls: { ca } } : {});
  // A quarter of a CPU: a 2-core laptop still holds the docs' examples beside it (docs/sdk.md).
  const deployed = await cluster.deploy({ name: 'mlp', model: 'mlp.onnx', cpus: 0.25, threads: 1 });
  const actor = deployed.actors[0];
  process.stdout.write(`deployed 'mlp' (${modelDir}/mlp.onnx) on ${actor?.node} as pid ${actor?.pid}\n`);
  const { logits } = await cluster.run('mlp', { x: sampleInput() });
  const values = [...(logits?.data as Float32Array)];
  const best = values.indexOf(Math.max(...values));
  process.stdout.write(
    `sample inference: logits ${logits?.dtype}[${logits?.shape.join(',')}] = [${values.map((v) => v.toFixed(4)).join(', ')}], argmax ${best}\n`,
  );
  await cluster.close();
  process.stdout.write(
    `\nTroupe is up at ${url}${grpcAddress ? `, gRPC at ${grpcAddress}` : ''}  (SDK: connect('${url.replace('http', 'ws')}'${ca ? ', { tls: { ca } }' : ''}); Ctrl-C to stop)\n`,
  );
}
