import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { TroupeError } from '../runtime/internal.js';
import { helpOf, parseFlags, specOf } from './flags.js';
import type { ArgDef, FlagDef } from './flags.js';
import { DEFAULT_HEAD, HeadUrlSchema, headClient, splitPositionals } from './http-client.js';

export const INFER_ARGS: readonly ArgDef[] = [
  { name: 'NAME', help: "a deployment's or a graph's name" },
  {
    name: 'FILE',
    help: 'an Open Inference Protocol request as JSON (\'-\' reads standard input), e.g.\n{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 64], "data": [0.1, ...]}]}',
  },
];

export const INFER_FLAGS: readonly FlagDef[] = [
  { name: 'head', value: 'URL', help: `the head (default ${DEFAULT_HEAD}, or TROUPE_HEAD)` },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN)' },
  { name: 'json', help: "print the head's JSON answer as it is" },
];

export const INFER_HELP = helpOf(
  "troupe infer NAME FILE: run a deployment or a graph once, through the head's HTTP API",
  INFER_ARGS,
  INFER_FLAGS,
);

export const InferFlagsSchema = z.object({
  head: HeadUrlSchema.prefault(DEFAULT_HEAD),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  json: z.boolean().default(false),
});

const AnswerSchema = z.object({
  model_name: z.string(),
  outputs: z.array(z.object({ name: z.string(), datatype: z.string(), shape: z.array(z.number()), data: z.array(z.unknown()).optional() })),
});

/** At most this many values of each output are printed; --json prints them all. */
const SHOWN_VALUES = 10;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function readRequest(file: string): Promise<unknown> {
  let text: string;
  try {
    text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `infer: cannot read FILE '${file}': ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${file === '-' ? 'standard input' : file} is not JSON: ${(err as Error).message}`);
  }
}

/** `troupe infer NAME FILE`: POST /v2/models/NAME/infer, the same endpoint for a model and a graph. */
export async function inferCommand(argv: string[]): Promise<void> {
  const spec = specOf(INFER_FLAGS);
  const { positionals, flags: rest } = splitPositionals('infer', argv, spec);
  const flags = parseFlags('infer', rest, spec, InferFlagsSchema);
  if (positionals.length !== 2)
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      `infer: NAME and FILE are required, got ${positionals.length} argument(s) (see troupe infer --help)`,
    );
  const [name, file] = positionals as [string, string];
  const request = await readRequest(file);
  const client = headClient(flags.head, flags.token ?? process.env.TROUPE_TOKEN);
  const { body } = await client.request('POST', `/v2/models/${encodeURIComponent(name)}/infer`, request);
  if (flags.json) return void process.stdout.write(`${JSON.stringify(body)}\n`);
  const answer = AnswerSchema.parse(body);
  for (const o of answer.outputs) {
    const values = (o.data ?? []).slice(0, SHOWN_VALUES).map((v) => (typeof v === 'number' ? Number(v.toFixed(4)) : v));
    const more = (o.data?.length ?? 0) > SHOWN_VALUES ? ', …' : '';
    process.stdout.write(`${o.name} ${o.datatype}[${o.shape.join(',')}] = [${values.join(', ')}${more}]\n`);
  }
}
