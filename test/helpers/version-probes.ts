import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildMlp } from '../../models/index.js';
import { tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import type { GrpcClient } from './grpc-client.js';
import { floatsOfRaw, rawFloats } from './grpc-client.js';
import { runInProcess, seededFloats } from './tensors.js';

/**
 * Probes that say WHICH model answered a call, over the SDK, HTTP, gRPC and generate: MLPs built
 * with different seeds give different logits for the same input, so each answer is matched to
 * the one model file whose in-process answer it equals.
 */

/** The probe input every call sends. */
export const PROBE_X = seededFloats(64, 3);
export const probeInput = () => ({ x: tensor('float32', [1, 64], PROBE_X) });

/** What each model file answers for the probe input, to tell answers apart. */
export type ModelAnswers = ReadonlyMap<string, readonly number[]>;

/**
 * Writes `count` distinguishable MLPs into `dir` (`mlp-0.onnx` is the example mlp's seed, the
 * others seeds 7, 8, ...) and returns each one's answer to the probe input.
 */
export async function writeDistinctMlps(dir: string, count: number): Promise<{ files: string[]; answers: ModelAnswers }> {
  const files: string[] = [];
  const answers = new Map<string, number[]>();
  for (let i = 0; i < count; i++) {
    const file = `mlp-${i}.onnx`;
    const path = join(dir, file);
    await writeFile(path, (i === 0 ? buildMlp() : buildMlp({ seed: 6 + i })).bytes);
    files.push(file);
    answers.set(file, Array.from((await runInProcess(path, probeInput())).logits!.data as Float32Array));
  }
  return { files, answers };
}

/** The model file whose answer `logits` is; throws naming the logits when it is none of them. */
export function whichModel(answers: ModelAnswers, logits: ArrayLike<number>): string {
  for (const [file, expected] of answers) if (expected.every((v, i) => Math.abs(v - logits[i]!) < 1e-4)) return file;
  throw new Error(`an answer from none of the models: ${Array.from(logits).slice(0, 4).join(',')}...`);
}

/** One answer: the model file that produced it and the version the answer named ('' or undefined where none). */
export interface Probe {
  model: string;
  version: string | undefined;
}

/** `name` may be a multiplexed set's `set:member`. */
export async function probeSdk(client: Cluster, answers: ModelAnswers, name: string): Promise<Probe> {
  const [deployment, member] = name.split(':') as [string, string | undefined];
  const future = client.run(deployment, probeInput(), { timeoutMs: 30_000, ...(member !== undefined ? { model: member } : {}) });
  const out = await future;
  return { model: whichModel(answers, out.logits!.data as Float32Array), version: await future.version() };
}

export async function probeHttp(url: string, answers: ModelAnswers, name: string, token?: string): Promise<Probe> {
  const res = await fetch(`${url}/v2/models/${name}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(PROBE_X) }] }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${name}: ${text}`);
  const body = JSON.parse(text) as { model_version: string; outputs: { data: number[] }[] };
  return { model: whichModel(answers, body.outputs[0]!.data), version: body.model_version };
}

export async function probeGrpc(grpc: GrpcClient, answers: ModelAnswers, name: string): Promise<Probe> {
  const answer = await grpc.call<{ model_version: string; raw_output_contents: Buffer[] }>('ModelInfer', {
    model_name: name,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64] }],
    raw_input_contents: [rawFloats(PROBE_X)],
  });
  return { model: whichModel(answers, floatsOfRaw(answer.raw_output_contents[0]!)), version: answer.model_version };
}

export async function probeGenerate(url: string, answers: ModelAnswers, name: string): Promise<Probe> {
  const res = await fetch(`${url}/v2/models/${name}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ x: [Array.from(PROBE_X)] }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`generate: HTTP ${res.status} from ${name}: ${text}`);
  const body = JSON.parse(text) as { model_version: string; logits: number[] };
  return { model: whichModel(answers, body.logits), version: body.model_version };
}

/** Calls in loops until stopped: every answer and failure kept, for the tests that change a deployment under load. */
export interface CallLoad {
  seen: Probe[];
  failures: string[];
  /** Calls answered or failed so far. */
  sent(): number;
  stop(): Promise<void>;
}

/** Runs each of `probes` in a loop of its own until `stop()`. */
export function callLoad(probes: (() => Promise<Probe>)[]): CallLoad {
  let flowing = true;
  const seen: Probe[] = [];
  const failures: string[] = [];
  const loop = async (probe: () => Promise<Probe>) => {
    while (flowing) {
      try {
        seen.push(await probe());
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
  };
  const loops = probes.map(loop);
  return {
    seen,
    failures,
    sent: () => seen.length + failures.length,
    stop: async () => {
      flowing = false;
      await Promise.all(loops);
    },
  };
}
