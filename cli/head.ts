import { z } from 'zod';
import { startHead } from '../head/index.js';
import type { Head } from '../head/index.js';
import { TroupeError, plural, readPem } from '../runtime/internal.js';
import { PortSchema, helpOf, onShutdown, parseFlags, specOf } from './flags.js';
import type { FlagDef } from './flags.js';

export const HEAD_FLAGS: readonly FlagDef[] = [
  { name: 'host', value: 'HOST', help: 'address to listen on (default 127.0.0.1, or TROUPE_HOST)' },
  { name: 'port', value: 'PORT', help: 'port to listen on, 0 for any (default 8470, or TROUPE_PORT)' },
  {
    name: 'grpc-port',
    value: 'PORT',
    help: "port of the gRPC inference service (Triton's GRPCInferenceService), on\nthe same host; 0 for any (default: beside the HTTP port, PORT+1, so\n8471; or TROUPE_GRPC_PORT; 0 when --port is 0)",
  },
  { name: 'no-grpc', help: 'serve no gRPC endpoint' },
  {
    name: 'probe-port',
    value: 'PORT',
    help: "also answer /healthz and /readyz on this port, on the same host, for an\norchestrator's probes (0 for any): only probes wait in its accept queue,\nso a burst of connections to the main port does not make them late\n(default: none; the main port always answers them)",
  },
  {
    name: 'token',
    value: 'TOKEN',
    help: 'cluster token agents and clients must present (or TROUPE_TOKEN);\nrequired when HOST is not loopback',
  },
  { name: 'suspect-after-ms', value: 'MS', help: 'heartbeat silence before a node is SUSPECT (default 3000)' },
  { name: 'dead-after-ms', value: 'MS', help: 'heartbeat silence before a node is DEAD and its actors move (default 10000)' },
  { name: 'max-restarts', value: 'N', help: 'crashes in 10 minutes before an actor is DEAD (default 5)' },
  {
    name: 'data-dir',
    value: 'DIR',
    help: "where uploaded models and the head's state (deployments, graphs,\nrunning actors, in state.json) are kept (default .troupe/head); a head\nrestarted on the same DIR brings its deployments back and adopts the\nactors that kept running; one head per DIR (it holds DIR/head.lock)",
  },
  {
    name: 'discard-state',
    help: 'start with no deployments when DIR/state.json cannot be read\n(it is renamed aside); without it such a file stops the head',
  },
  { name: 'max-body-mib', value: 'N', help: 'largest HTTP request body, e.g. an inference (default 64)' },
  { name: 'max-model-mib', value: 'N', help: 'largest model upload (default 1024)' },
  { name: 'max-frame-mib', value: 'N', help: 'largest frame from a peer; a larger one closes its connection (default 256)' },
  { name: 'drain-ms', value: 'MS', help: 'on SIGTERM, how long accepted calls get to finish (default 10000)' },
  { name: 'job-ttl-s', value: 'S', help: "how long a finished async job's result is kept (default 3600)" },
  { name: 'max-jobs', value: 'N', help: 'finished async jobs kept, at most (default 1000)' },
  { name: 'max-job-mib', value: 'N', help: 'bytes of async job results kept, at most (default 256)' },
  { name: 'job-concurrency', value: 'N', help: 'async jobs running at once; the rest wait QUEUED (default 32)' },
  { name: 'max-connections', value: 'N', help: 'open TCP connections the head accepts at once; more are closed (default 10000)' },
  {
    name: 'stream-idle-s',
    value: 'S',
    help: 'a server-sent event stream whose connection takes nothing for S\nseconds is cancelled, freeing its actor (default 60)',
  },
  {
    name: 'http-workers',
    value: 'N',
    help: 'processes beside the head that serve inference-protocol connections\n(/v2/...) and call replicas directly (default: one per core, at most\n4; 0 serves every request in the head process)',
  },
  {
    name: 'http-handoff',
    help: "every replica on this host serves its deployment's inference\nconnections itself, handed over by the head, however many replicas\n(balanced by connection; a replica's connections end with it). By\ndefault only a model's lone replica does, or replicas the head chose\nat load (docs/front-door.md)",
  },
  {
    name: 'no-http-handoff',
    help: 'no replica serves HTTP itself: the front-door workers serve every\ninference connection',
  },
  {
    name: 'tls-cert',
    value: 'FILE',
    help: "serve HTTPS/WSS and gRPC over TLS with this certificate (PEM), and\nhave replicas' direct ports present it too; plaintext is refused on\nevery port; front-door workers and handoff are off (docs/security.md)",
  },
  { name: 'tls-key', value: 'FILE', help: 'the private key of --tls-cert (PEM); it never reaches a log or the state file' },
  {
    name: 'tls-agent-ca',
    value: 'FILE',
    help: 'mutual TLS with agents: an agent must present a certificate this CA\n(PEM) signed (troupe agent --tls-cert/--tls-key); needs --tls-cert',
  },
];

export const HEAD_HELP = helpOf('troupe head: run the head (scheduler, HTTP API and connection endpoints)', [], HEAD_FLAGS);

export const HeadFlagsSchema = z.object({
  host: z
    .string()
    .min(1)
    .default(process.env.TROUPE_HOST ?? '127.0.0.1'),
  port: PortSchema.default(Number(process.env.TROUPE_PORT ?? 8470)),
  grpcPort: PortSchema.optional(),
  noGrpc: z.boolean().optional(),
  probePort: PortSchema.optional(),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  suspectAfterMs: z.coerce.number().int().min(100).max(3_600_000).optional(),
  deadAfterMs: z.coerce.number().int().min(100).max(3_600_000).optional(),
  maxRestarts: z.coerce.number().int().min(0).max(1000).optional(),
  dataDir: z.string().min(1).default('.troupe/head'),
  discardState: z.boolean().optional(),
  maxBodyMib: z.coerce.number().positive('must be above 0').max(4096).optional(),
  maxModelMib: z.coerce.number().positive('must be above 0').max(2047).optional(),
  maxFrameMib: z.coerce.number().positive('must be above 0').max(2047).optional(),
  drainMs: z.coerce.number().int().min(0).max(600_000).optional(),
  jobTtlS: z.coerce
    .number()
    .positive('must be above 0')
    .max(30 * 86_400)
    .optional(),
  maxJobs: z.coerce.number().int('must be a whole number').min(1).max(1_000_000).optional(),
  maxJobMib: z.coerce.number().positive('must be above 0').max(65_536).optional(),
  jobConcurrency: z.coerce.number().int('must be a whole number').min(1).max(10_000).optional(),
  maxConnections: z.coerce.number().int('must be a whole number').min(1).max(1_000_000).optional(),
  httpWorkers: z.coerce.number().int('must be a whole number').min(0).max(64).optional(),
  streamIdleS: z.coerce.number().positive('must be above 0').max(86_400).optional(),
  httpHandoff: z.boolean().optional(),
  noHttpHandoff: z.boolean().optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  tlsAgentCa: z.string().min(1).optional(),
});

/** The head's TLS from its flags: files read here, each refusal naming its flag. */
export function headTlsOf(flags: { tlsCert?: string | undefined; tlsKey?: string | undefined; tlsAgentCa?: string | undefined }) {
  if (!flags.tlsCert && !flags.tlsKey) {
    if (flags.tlsAgentCa) throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'head: --tls-agent-ca needs --tls-cert and --tls-key');
    return undefined;
  }
  if (!flags.tlsCert || !flags.tlsKey)
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'head: --tls-cert and --tls-key go together; give both');
  return {
    cert: readPem('--tls-cert', flags.tlsCert),
    key: readPem('--tls-key', flags.tlsKey),
    ...(flags.tlsAgentCa ? { agentCa: readPem('--tls-agent-ca', flags.tlsAgentCa) } : {}),
  };
}

/**
 * The gRPC port: the flag, else TROUPE_GRPC_PORT, else beside the HTTP port (8470 → 8471), so one
 * --port or TROUPE_PORT moves both; a head asked for any HTTP port (--port 0) takes any gRPC port
 * too, so heads started side by side (tests, scripts) never collide.
 */
export function grpcPortOf(flag: number | undefined, httpPort: number, env = process.env.TROUPE_GRPC_PORT): number {
  if (flag !== undefined) return flag;
  if (env !== undefined) {
    const parsed = PortSchema.safeParse(env);
    if (!parsed.success) throw new TroupeError('TROUPE_ERR_BAD_FLAG', `head: TROUPE_GRPC_PORT: ${parsed.error.issues[0]!.message}`);
    return parsed.data;
  }
  if (httpPort === 0) return 0;
  if (httpPort === 65_535)
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'head: --port 65535 leaves no port beside it for gRPC; give --grpc-port or --no-grpc');
  return httpPort + 1;
}

/** Names shown of each kind; the rest are counted. */
const RESTORED_SHOWN = 12;

function namesOf(kind: string, names: readonly string[]): string {
  const shown = names.slice(0, RESTORED_SHOWN).join(', ');
  const more = names.length > RESTORED_SHOWN ? ` and ${names.length - RESTORED_SHOWN} more` : '';
  return `${plural(names.length, kind)}${names.length > 0 ? ` (${shown}${more})` : ''}`;
}

/**
 * What a head brought back from its data directory, said at start: deployments and graphs of an
 * earlier session return unasked (the state file is the point of --data-dir), so name them.
 */
export function restoredLine(restored: NonNullable<Head['restored']>): string {
  return `restored from ${restored.file}: ${namesOf('deployment', restored.deployments)}, ${namesOf('graph', restored.graphs)} (troupe delete NAME removes one; another --data-dir starts empty)`;
}

export async function headCommand(argv: string[]): Promise<void> {
  const flags = parseFlags('head', argv, specOf(HEAD_FLAGS), HeadFlagsSchema);
  const token = flags.token ?? process.env.TROUPE_TOKEN;
  if (flags.noGrpc && flags.grpcPort !== undefined)
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'head: --grpc-port and --no-grpc contradict each other; give one');
  if (flags.httpHandoff && flags.noHttpHandoff)
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'head: --http-handoff and --no-http-handoff contradict each other; give one');
  if (flags.httpHandoff && flags.httpWorkers === 0)
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      'head: --http-handoff needs --http-workers above 0 (the workers take the connections a replica cannot); give one',
    );
  const grpcPort = flags.noGrpc ? undefined : grpcPortOf(flags.grpcPort, flags.port);
  const tls = headTlsOf(flags);
  const head = await startHead({
    host: flags.host,
    port: flags.port,
    ...(grpcPort !== undefined ? { grpcPort } : {}),
    ...(flags.probePort !== undefined ? { probePort: flags.probePort } : {}),
    ...(token ? { token } : {}),
    liveness: {
      ...(flags.suspectAfterMs !== undefined ? { suspectAfterMs: flags.suspectAfterMs } : {}),
      ...(flags.deadAfterMs !== undefined ? { deadAfterMs: flags.deadAfterMs } : {}),
    },
    controller: flags.maxRestarts !== undefined ? { maxRestarts: flags.maxRestarts } : {},
    dataDir: flags.dataDir,
    ...(flags.discardState ? { discardState: true } : {}),
    ...(flags.maxBodyMib !== undefined ? { maxBodyBytes: Math.round(flags.maxBodyMib * 2 ** 20) } : {}),
    ...(flags.maxModelMib !== undefined ? { maxModelBytes: Math.round(flags.maxModelMib * 2 ** 20) } : {}),
    ...(flags.maxFrameMib !== undefined ? { maxFrameBytes: Math.round(flags.maxFrameMib * 2 ** 20) } : {}),
    ...(flags.drainMs !== undefined ? { drainMs: flags.drainMs } : {}),
    ...(flags.maxConnections !== undefined ? { maxConnections: flags.maxConnections } : {}),
    ...(flags.httpWorkers !== undefined ? { httpWorkers: flags.httpWorkers } : {}),
    ...(flags.streamIdleS !== undefined ? { streamIdleMs: Math.round(flags.streamIdleS * 1000) } : {}),
    ...(flags.httpHandoff ? { httpHandoff: true } : flags.noHttpHandoff ? { httpHandoff: false } : {}),
    ...(tls ? { tls } : {}),
    jobs: {
      ...(flags.jobTtlS !== undefined ? { ttlMs: Math.round(flags.jobTtlS * 1000) } : {}),
      ...(flags.maxJobs !== undefined ? { maxJobs: flags.maxJobs } : {}),
      ...(flags.maxJobMib !== undefined ? { maxBytes: Math.round(flags.maxJobMib * 2 ** 20) } : {}),
      ...(flags.jobConcurrency !== undefined ? { concurrency: flags.jobConcurrency } : {}),
    },
  });
  // Before the line that says the head is ready, so troupe up (which echoes it) shows it first.
  if (head.restored) process.stdout.write(`${restoredLine(head.restored)}\n`);
  if (head.probeUrl) process.stdout.write(`troupe head probes (/healthz, /readyz) on ${head.probeUrl}\n`);
  // One line on stdout that people and scripts (troupe up, the tests) read to find the head.
  process.stdout.write(`troupe head listening on ${head.url}${head.grpcAddress ? ` and gRPC on ${head.grpcAddress}` : ''}\n`);
  onShutdown(() => head.close());
}
