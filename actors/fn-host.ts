import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import {
  FnActorEnvSchema,
  FnSignatureSchema,
  TroupeError,
  createLogger,
  disableOrtTelemetryByDefault,
  mapFromWire,
  mapToWire,
} from '../runtime/internal.js';
import type { FnActorEnv, FnSignature, StepFn, Tensor } from '../runtime/internal.js';
import { withShownPath } from '../runtime/model-path.js';
import { joinHead } from './head-socket.js';
import { checkTensorOutputs } from './tensor-outputs.js';
import type { HeadSocket } from './head-socket.js';
import { ACTOR_EXIT, followAgent, readActorEnv } from './process-boot.js';

/**
 * The entry point of one fn actor: a process that runs one exported function of a module on the
 * agent, for graph steps (pre- and post-processing, custom combiners). The agent resolved the
 * module inside its --module-dir; this process imports it, reports its signature (or none) and
 * answers calls like a model actor. A function that blocks the event loop blocks only this process.
 * Like a model actor it outlives a lost head connection and rejoins (head-socket.ts).
 */
const log = createLogger('fn-actor');
// A user's fn may run onnxruntime itself: no telemetry from it either (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

async function load(env: FnActorEnv): Promise<{ fn: StepFn; signature: FnSignature }> {
  const what = `fn '${env.TROUPE_FN_EXPORT}' of ${env.TROUPE_FN_MODULE}`;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(env.TROUPE_FN_MODULE).href)) as Record<string, unknown>;
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `cannot import ${env.TROUPE_FN_MODULE}: ${(err as Error).message}`);
  }
  const fn = mod[env.TROUPE_FN_EXPORT];
  if (typeof fn !== 'function') {
    const has =
      Object.keys(mod)
        .filter((k) => typeof mod[k] === 'function')
        .join(', ') || 'no functions';
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `${what} is not an exported function (the module exports ${has})`);
  }
  const declared = (fn as StepFn).signature;
  if (declared === undefined) return { fn: fn as StepFn, signature: { inputs: [], outputs: [] } };
  const signature = FnSignatureSchema.safeParse(declared);
  if (!signature.success)
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `${what} has a malformed signature: ${signature.error.issues[0]?.message}`);
  return { fn: fn as StepFn, signature: signature.data };
}

/** A fn's answer as tensors: a map of {dtype, shape, data}, each checked, else TROUPE_ERR_FN_FAILED. */
function checkOutputs(name: string, value: unknown): Record<string, Tensor> {
  return checkTensorOutputs(`fn '${name}'`, value, 'TROUPE_ERR_FN_FAILED');
}

async function main(): Promise<void> {
  const env = readActorEnv(FnActorEnvSchema, 'fn actor');
  const name = env.TROUPE_FN_EXPORT;
  followAgent();

  let inFlight = 0;
  let stopping = false;
  let idle: (() => void) | undefined;
  let head: HeadSocket | undefined;
  // SIGTERM drains: calls already accepted finish, new ones are refused with a retryable code,
  // and the last replies leave (the socket is closed after a flush) before the process exits.
  const exitClean = () => void (head?.close(1000) ?? Promise.resolve()).then(() => process.exit(0));
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    if (inFlight === 0) exitClean();
    else idle = exitClean;
  });

  let loaded: Awaited<ReturnType<typeof load>> | undefined;
  let loadError: TroupeError | undefined;
  try {
    loaded = await load(env);
  } catch (err) {
    const full = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_MODEL_LOAD', String(err));
    // The absolute path stays in this machine's log; the head and its caller see the path as named.
    log.warn({ code: full.code, module: env.TROUPE_FN_MODULE }, full.message);
    loadError = withShownPath(full, env.TROUPE_FN_MODULE, env.TROUPE_SHOWN_PATH);
  }

  head = joinHead({
    env,
    log,
    exitCodes: ACTOR_EXIT,
    readiness: () =>
      loaded
        ? {
            type: 'ready',
            metadata: loaded.signature,
            device: 'cpu',
            provider: 'fn',
            visibleDevices: process.env.CUDA_VISIBLE_DEVICES ?? '',
          }
        : (loadError ?? new TroupeError('TROUPE_ERR_MODEL_LOAD', 'the fn did not load')),
    onMessage: (message, channel) => {
      // A fn actor offers no handoff socket, so a head sends it calls only.
      if (!loaded || message.type !== 'call') return;
      if (stopping) {
        channel.fail(message.id, new TroupeError('TROUPE_ERR_SHUTTING_DOWN', `actor ${env.TROUPE_ACTOR_ID} is draining`));
        return;
      }
      // The agent judges a silent actor by its CPU time, so no per-call health messages are needed.
      inFlight++;
      const started = performance.now();
      const fn = loaded.fn;
      Promise.resolve()
        .then(() => fn(mapFromWire(message.inputs, 'input')))
        .then(
          (value) => {
            const all = checkOutputs(name, value);
            const wanted = message.outputs?.length
              ? Object.fromEntries(message.outputs.filter((o) => o in all).map((o) => [o, all[o]!]))
              : all;
            const rows = Object.values(message.inputs)[0]?.shape[0] ?? 0;
            const timing = { queueMs: 0, computeMs: performance.now() - started, batchRows: rows, batchCalls: 1 };
            channel.send({ type: 'reply', id: message.id, value: { outputs: mapToWire(wanted), timing } });
          },
          (err: unknown) => {
            const error =
              err instanceof TroupeError
                ? err
                : new TroupeError('TROUPE_ERR_FN_FAILED', `fn '${name}' threw: ${(err as Error)?.message ?? String(err)}`);
            channel.fail(message.id, error);
          },
        )
        .catch((err: unknown) => channel.fail(message.id, err))
        .finally(() => {
          if (--inFlight === 0) idle?.();
        });
    },
  });
  if (loaded) log.info({ actor: env.TROUPE_ACTOR_ID, fn: name }, 'fn loaded');
}

main().catch((err: unknown) => {
  process.stderr.write(`troupe fn actor: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
