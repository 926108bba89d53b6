import { z } from 'zod';
import { startHead } from '../head/index.js';
import { PortSchema, onShutdown, parseFlags } from './flags.js';

export const HEAD_HELP = `troupe head: run the head (scheduler, HTTP API and WebSocket endpoints)

  --host HOST     address to listen on (default 127.0.0.1, or TROUPE_HOST)
  --port PORT     port to listen on, 0 for any (default 8470, or TROUPE_PORT)
  --token TOKEN   cluster token agents and clients must present (or TROUPE_TOKEN);
                  required when HOST is not loopback
  --suspect-after-ms MS  heartbeat silence before a node is SUSPECT (default 3000)
  --dead-after-ms MS     heartbeat silence before a node is DEAD and its actors move (default 10000)
  --max-restarts N       crashes in 10 minutes before an actor is DEAD (default 5)
  --data-dir DIR         where uploaded models are kept (default .troupe/head)
  --max-body-mib N       largest HTTP request body, e.g. an inference (default 64)
  --max-model-mib N      largest model upload (default 1024)
`;

const Schema = z.object({
  host: z.string().min(1).default(process.env.TROUPE_HOST ?? '127.0.0.1'),
  port: PortSchema.default(Number(process.env.TROUPE_PORT ?? 8470)),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  suspectAfterMs: z.coerce.number().int().min(100).max(3_600_000).optional(),
  deadAfterMs: z.coerce.number().int().min(100).max(3_600_000).optional(),
  maxRestarts: z.coerce.number().int().min(0).max(1000).optional(),
  dataDir: z.string().min(1).default('.troupe/head'),
  maxBodyMib: z.coerce.number().positive('must be above 0').max(4096).optional(),
  maxModelMib: z.coerce.number().positive('must be above 0').max(2047).optional(),
});

export async function headCommand(argv: string[]): Promise<void> {
  const flags = parseFlags(
    'head',
    argv,
    {
      host: { type: 'string' },
      port: { type: 'string' },
      token: { type: 'string' },
      'suspect-after-ms': { type: 'string' },
      'dead-after-ms': { type: 'string' },
      'max-restarts': { type: 'string' },
      'data-dir': { type: 'string' },
      'max-body-mib': { type: 'string' },
      'max-model-mib': { type: 'string' },
    },
    Schema,
  );
  const token = flags.token ?? process.env.TROUPE_TOKEN;
  const head = await startHead({
    host: flags.host,
    port: flags.port,
    ...(token ? { token } : {}),
    liveness: {
      ...(flags.suspectAfterMs !== undefined ? { suspectAfterMs: flags.suspectAfterMs } : {}),
      ...(flags.deadAfterMs !== undefined ? { deadAfterMs: flags.deadAfterMs } : {}),
    },
    controller: flags.maxRestarts !== undefined ? { maxRestarts: flags.maxRestarts } : {},
    dataDir: flags.dataDir,
    ...(flags.maxBodyMib !== undefined ? { maxBodyBytes: Math.round(flags.maxBodyMib * 2 ** 20) } : {}),
    ...(flags.maxModelMib !== undefined ? { maxModelBytes: Math.round(flags.maxModelMib * 2 ** 20) } : {}),
  });
  // One line on stdout that people and scripts (troupe up, the tests) read to find the head.
  process.stdout.write(`troupe head listening on ${head.url}\n`);
  onShutdown(() => head.close());
}
