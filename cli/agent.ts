import { statSync } from 'node:fs';
import { z } from 'zod';
import { NodeAgent } from '../node-agent/index.js';
import { NameSchema, TroupeError, isMilliAmount, isSecureUrl, readPem } from '../runtime/internal.js';
import { helpOf, onShutdown, parseFlags, specOf } from './flags.js';
import type { FlagDef } from './flags.js';

/** A directory that is there: a mistyped one would only show at the first deploy that names a file in it. */
const ExistingDirSchema = z
  .string()
  .min(1)
  .refine((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory() === true, 'no such directory');

export const AGENT_FLAGS: readonly FlagDef[] = [
  { name: 'head', value: 'URL', help: 'the head, e.g. ws://127.0.0.1:8470 (required)', required: true },
  { name: 'name', value: 'NAME', help: "this node's name (default: host name)" },
  {
    name: 'advertise',
    value: 'ADDRESS',
    help: "host name or IP the head records for this node (default: the\naddress the agent's connection comes from)",
  },
  { name: 'model-dir', value: 'DIR', help: 'directory deployments name models in (default: current directory)' },
  { name: 'cpus', value: 'N', help: 'CPUs to offer the scheduler (default: all cores)' },
  { name: 'max-actors', value: 'N', help: 'most actor processes on this node (default: 8 per CPU of --cpus)' },
  { name: 'memory-mib', value: 'MIB', help: "host memory to offer the scheduler (default: the machine's total)" },
  { name: 'simulate-gpus', value: 'N', help: 'pretend this machine has N GPUs (actors run on CPU)' },
  { name: 'simulated-gpu-memory', value: 'MIB', help: 'memory of each simulated GPU (default 16384)' },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN)' },
  {
    name: 'module-dir',
    value: 'DIR',
    help: 'directory fn steps name their modules in; without it the agent runs\nno fn steps (they run arbitrary code: see docs/security.md).\nnode_modules/, dot-folders and paths leading out are refused',
  },
  {
    name: 'actor-links',
    value: 'direct|relay',
    help: "how this node's actors reach the head: a connection each (direct,\nthe default) or relayed over this agent's (relay: one socket per node)",
  },
  {
    name: 'state-dir',
    value: 'DIR',
    help: 'where the agent records the actors it runs (DIR/actors.json), to kill\norphans on restart (default: troupe-agent-NAME in the system temp\nfolder; troupe up uses its --data-dir/agent)',
  },
  {
    name: 'tls-ca',
    value: 'FILE',
    help: "the CA (PEM) that signed the head's certificate, for a wss:// or\nhttps:// head (default: TROUPE_TLS_CA, else Node's roots); the\nagent's actors verify the head with it too",
  },
  {
    name: 'tls-cert',
    value: 'FILE',
    help: 'a client certificate (PEM) for a head started with --tls-agent-ca',
  },
  { name: 'tls-key', value: 'FILE', help: 'the private key of --tls-cert (PEM)' },
  { name: 'nvidia-smi', value: 'PATH', help: 'nvidia-smi to run (default: from PATH); none: offer no GPUs' },
  { name: 'heartbeat-ms', value: 'MS', help: 'heartbeat interval (default 1000)' },
  { name: 'health-interval-ms', value: 'MS', help: 'actor health-check interval (default 1000)' },
  { name: 'health-timeout-ms', value: 'MS', help: 'an idle actor silent this long is killed and restarted (default 10000)' },
  {
    name: 'max-inference-ms',
    value: 'MS',
    help: 'an inference (or a class method call) running this long counts as hung (default 300000)',
  },
];

export const AGENT_HELP = helpOf('troupe agent: run a node agent that starts model actors for a head', [], AGENT_FLAGS);

export const AgentFlagsSchema = z.object({
  head: z.string({ error: 'is required' }).regex(/^(ws|wss|http|https):\/\/[^\s]+$/, 'must be a ws://, wss://, http:// or https:// URL'),
  name: NameSchema.optional(),
  advertise: z
    .string()
    .max(253)
    .regex(/^[A-Za-z0-9.:_-]+$/, 'must be a host name or an IP address, without a scheme or port')
    .optional(),
  modelDir: ExistingDirSchema.default(process.cwd()),
  moduleDir: ExistingDirSchema.optional(),
  cpus: z.coerce
    .number()
    .positive('must be above 0')
    .max(4096)
    .refine(isMilliAmount, 'must have at most 3 decimals (CPUs are counted in thousandths)')
    .optional(),
  maxActors: z.coerce.number().int('must be a whole number').min(1).max(100_000).optional(),
  memoryMib: z.coerce
    .number()
    .int('must be a whole number')
    .min(1)
    .max(1 << 30)
    .optional(),
  simulateGpus: z.coerce.number().int('must be a whole number').min(0).max(64).optional(),
  simulatedGpuMemory: z.coerce.number().int().positive().optional(),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  actorLinks: z.enum(['direct', 'relay']).optional(),
  stateDir: z.string().min(1).optional(),
  nvidiaSmi: z.string().min(1).optional(),
  heartbeatMs: z.coerce.number().int().min(50).max(60_000).optional(),
  healthIntervalMs: z.coerce.number().int().min(50).max(600_000).optional(),
  healthTimeoutMs: z.coerce.number().int().min(100).max(3_600_000).optional(),
  maxInferenceMs: z.coerce.number().int().min(100).max(86_400_000).optional(),
  tlsCa: z.string().min(1).optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
});

/** The agent's TLS from its flags (and TROUPE_TLS_CA): undefined for a plaintext head. */
function agentTlsOf(flags: z.output<typeof AgentFlagsSchema>) {
  const caFile = flags.tlsCa ?? process.env.TROUPE_TLS_CA;
  const any = caFile !== undefined || flags.tlsCert !== undefined || flags.tlsKey !== undefined;
  if (!any) return undefined;
  if (!isSecureUrl(flags.head)) {
    if (flags.tlsCa || flags.tlsCert || flags.tlsKey)
      throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'agent: --tls-ca, --tls-cert and --tls-key need a wss:// or https:// --head');
    return undefined;
  }
  if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined))
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', 'agent: --tls-cert and --tls-key go together; give both');
  return {
    ...(caFile ? { ca: readPem(flags.tlsCa ? '--tls-ca' : 'TROUPE_TLS_CA', caFile) } : {}),
    ...(flags.tlsCert && flags.tlsKey ? { cert: readPem('--tls-cert', flags.tlsCert), key: readPem('--tls-key', flags.tlsKey) } : {}),
  };
}

export async function agentCommand(argv: string[]): Promise<void> {
  const flags = parseFlags('agent', argv, specOf(AGENT_FLAGS), AgentFlagsSchema);
  const token = flags.token ?? process.env.TROUPE_TOKEN;
  const tls = agentTlsOf(flags);
  const agent = new NodeAgent({
    headUrl: flags.head.replace(/^http/, 'ws'),
    modelDir: flags.modelDir,
    ...(flags.moduleDir ? { moduleDir: flags.moduleDir } : {}),
    ...(flags.name ? { name: flags.name } : {}),
    ...(flags.advertise ? { advertise: flags.advertise } : {}),
    ...(flags.cpus !== undefined ? { cpus: flags.cpus } : {}),
    ...(flags.maxActors !== undefined ? { maxActors: flags.maxActors } : {}),
    ...(flags.memoryMib !== undefined ? { memoryBytes: flags.memoryMib * 2 ** 20 } : {}),
    ...(flags.simulateGpus !== undefined ? { simulateGpus: flags.simulateGpus } : {}),
    ...(flags.simulatedGpuMemory !== undefined ? { simulatedGpuMemoryMiB: flags.simulatedGpuMemory } : {}),
    ...(token ? { token } : {}),
    ...(flags.actorLinks ? { actorLinks: flags.actorLinks } : {}),
    ...(tls ? { tls } : {}),
    ...(flags.stateDir ? { stateDir: flags.stateDir } : {}),
    ...(flags.nvidiaSmi ? { nvidiaSmi: flags.nvidiaSmi } : {}),
    ...(flags.heartbeatMs !== undefined ? { heartbeatMs: flags.heartbeatMs } : {}),
    health: {
      ...(flags.healthIntervalMs !== undefined ? { intervalMs: flags.healthIntervalMs } : {}),
      ...(flags.healthTimeoutMs !== undefined ? { timeoutMs: flags.healthTimeoutMs } : {}),
      ...(flags.maxInferenceMs !== undefined ? { maxInferenceMs: flags.maxInferenceMs } : {}),
    },
  });
  onShutdown(() => agent.stop());
  await agent.start();
  process.stdout.write(`troupe agent ${agent.name} joined ${flags.head}\n`);
}
