import { z } from 'zod';
import { NodeAgent } from '../node-agent/index.js';
import { NameSchema } from '../runtime/index.js';
import { onShutdown, parseFlags } from './flags.js';

export const AGENT_HELP = `troupe agent: run a node agent that starts model actors for a head

  --head URL                  the head, e.g. ws://127.0.0.1:8470 (required)
  --name NAME                 this node's name (default: host name)
  --advertise ADDRESS         host name or IP the head records for this node (default: the
                              address the agent's connection comes from)
  --model-dir DIR             directory deployments name models in (default: current directory)
  --cpus N                    CPUs to offer the scheduler (default: all cores)
  --max-actors N              most actor processes on this node (default: 8 per CPU of --cpus)
  --memory-mib MIB            host memory to offer the scheduler (default: the machine's total)
  --simulate-gpus N           pretend this machine has N GPUs (actors run on CPU)
  --simulated-gpu-memory MIB  memory of each simulated GPU (default 16384)
  --token TOKEN               cluster token (or TROUPE_TOKEN)
  --module-dir DIR            directory fn steps name their modules in; without it the agent runs
                              no fn steps (they run arbitrary code: see docs/security.md).
                              node_modules/, dot-folders and paths leading out are refused
  --state-dir DIR             where the agent records the actors it runs, to kill orphans on restart
  --nvidia-smi PATH           nvidia-smi to run (default: from PATH)
  --heartbeat-ms MS           heartbeat interval (default 1000)
  --health-interval-ms MS     actor health-check interval (default 1000)
  --health-timeout-ms MS      an idle actor silent this long is killed and restarted (default 10000)
  --max-inference-ms MS       an inference running this long counts as hung (default 300000)
`;

const Schema = z.object({
  head: z.string({ error: 'is required' }).regex(/^(ws|wss|http|https):\/\/[^\s]+$/, 'must be a ws:// or http:// URL'),
  name: NameSchema.optional(),
  advertise: z
    .string()
    .max(253)
    .regex(/^[A-Za-z0-9.:_-]+$/, 'must be a host name or an IP address, without a scheme or port')
    .optional(),
  modelDir: z.string().min(1).default(process.cwd()),
  moduleDir: z.string().min(1).optional(),
  cpus: z.coerce.number().positive('must be above 0').max(4096).optional(),
  maxActors: z.coerce.number().int('must be a whole number').min(1).max(100_000).optional(),
  memoryMib: z.coerce.number().int('must be a whole number').min(1).max(1 << 30).optional(),
  simulateGpus: z.coerce.number().int('must be a whole number').min(0).max(64).optional(),
  simulatedGpuMemory: z.coerce.number().int().positive().optional(),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  stateDir: z.string().min(1).optional(),
  nvidiaSmi: z.string().min(1).optional(),
  heartbeatMs: z.coerce.number().int().min(50).max(60_000).optional(),
  healthIntervalMs: z.coerce.number().int().min(50).max(600_000).optional(),
  healthTimeoutMs: z.coerce.number().int().min(100).max(3_600_000).optional(),
  maxInferenceMs: z.coerce.number().int().min(100).max(86_400_000).optional(),
});

export async function agentCommand(argv: string[]): Promise<void> {
  const flags = parseFlags(
    'agent',
    argv,
    {
      head: { type: 'string' },
      name: { type: 'string' },
      advertise: { type: 'string' },
      'model-dir': { type: 'string' },
      'module-dir': { type: 'string' },
      cpus: { type: 'string' },
      'max-actors': { type: 'string' },
      'memory-mib': { type: 'string' },
      'simulate-gpus': { type: 'string' },
      'simulated-gpu-memory': { type: 'string' },
      token: { type: 'string' },
      'state-dir': { type: 'string' },
      'nvidia-smi': { type: 'string' },
      'heartbeat-ms': { type: 'string' },
      'health-interval-ms': { type: 'string' },
      'health-timeout-ms': { type: 'string' },
      'max-inference-ms': { type: 'string' },
    },
    Schema,
  );
  const token = flags.token ?? process.env.TROUPE_TOKEN;
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

