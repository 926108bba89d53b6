import { ActorEnvSchema, MultiplexSchema, TroupeError, createLogger, mapFromWire, mapToWire, validateInputs } from '../runtime/internal.js';
import type { ActorCall, ActorEnv, ActorStats, ActorToHead, Channel, HeadToActor } from '../runtime/internal.js';
import { withShownPath } from '../runtime/model-path.js';
import { batchOptions } from './batch-options.js';
import { joinHead } from './head-socket.js';
import type { HeadSocket } from './head-socket.js';
import { DEFAULT_POLL_INTERVAL_MS } from './model-files.js';
import { ModelSet } from './model-set.js';
import { answerTenant } from './tenant-ops.js';
import { ACTOR_EXIT, followAgent, readActorEnv } from './process-boot.js';

/**
 * The entry point of one replica of a multiplexed deployment: the agent resolved the deployment's
 * directory of models; this process serves any of them, loading each on its first call and keeping
 * the most recently used (actors/model-set.ts). Calls come only through the head, which sends a
 * call to a replica that holds its model when one has room. It says `ready` with no signature of
 * its own: each call is checked here against its model's. Otherwise it lives as a model actor does
 * (host.ts): it rejoins a restarted head, drains on SIGTERM, ends with its agent.
 */
const log = createLogger('actor');

function openSet(env: ActorEnv, deployment: string): ModelSet | TroupeError {
  try {
    const spec = MultiplexSchema.parse(JSON.parse(env.TROUPE_MULTIPLEX ?? '{}'));
    const set = new ModelSet(
      deployment,
      env.TROUPE_MODEL_PATH,
      spec,
      { device: env.TROUPE_DEVICE, ...(env.TROUPE_THREADS ? { threads: env.TROUPE_THREADS } : {}) },
      (metadata) => batchOptions(env.TROUPE_BATCH, { metadata }),
    );
    if (set.names.length === 0) return new TroupeError('TROUPE_ERR_MODEL_LOAD', `no *.onnx model in directory '${env.TROUPE_MODEL_PATH}'`);
    return set;
  } catch (err) {
    return new TroupeError(
      'TROUPE_ERR_MODEL_LOAD',
      `cannot read the models of directory '${env.TROUPE_MODEL_PATH}': ${(err as Error).message}`,
    );
  }
}

async function main(): Promise<void> {
  const env = readActorEnv(ActorEnvSchema, 'actor');
  followAgent();
  const deployment = env.TROUPE_DEPLOYMENT ?? env.TROUPE_ACTOR_ID;
  const opened = openSet(env, deployment);
  const set = opened instanceof ModelSet ? opened : undefined;
  const loadError = opened instanceof TroupeError ? withShownPath(opened, env.TROUPE_MODEL_PATH, env.TROUPE_SHOWN_PATH) : undefined;
  let stopping = false;
  let inFlight = 0;
  let idle: (() => void) | undefined;
  let head: HeadSocket | undefined;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    const drained = inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => (idle = resolve));
    void drained.then(() => head?.close(1000)).then(() => process.exit(0));
  });

  const serveCall = (message: ActorCall, channel: Pick<Channel<HeadToActor, ActorToHead>, 'send' | 'fail'>, release?: () => void) => {
    if (!set) return release?.();
    if (stopping) {
      release?.();
      return channel.fail(message.id, new TroupeError('TROUPE_ERR_SHUTTING_DOWN', `actor ${env.TROUPE_ACTOR_ID} is draining`));
    }
    if (message.model === undefined) {
      release?.();
      return channel.fail(
        message.id,
        new TroupeError('TROUPE_ERR_BAD_REQUEST', `deployment '${deployment}' serves several models: a call names one`),
      );
    }
    const model = message.model;
    inFlight++;
    set
      .run(model, (metadata) => {
        validateInputs(`${deployment}:${model}`, metadata, message.inputs, message.outputs);
        return [mapFromWire(message.inputs, 'input'), message.outputs, message.timeoutMs];
      })
      .then(
        ({ outputs, timing }) => channel.send({ type: 'reply', id: message.id, value: { outputs: mapToWire(outputs), timing } }),
        (err: unknown) => channel.fail(message.id, err),
      )
      .finally(() => {
        release?.();
        if (--inFlight === 0) idle?.();
      });
  };

  let last = '';
  head = joinHead({
    env,
    log,
    exitCodes: ACTOR_EXIT,
    readiness: () => {
      if (!set) return loadError ?? new TroupeError('TROUPE_ERR_MODEL_LOAD', 'the models did not load');
      last = '';
      return {
        type: 'ready',
        metadata: { inputs: [], outputs: [] },
        device: env.TROUPE_DEVICE,
        provider: env.TROUPE_DEVICE === 'cuda' ? 'cuda' : 'cpu',
        visibleDevices: process.env.CUDA_VISIBLE_DEVICES ?? '',
      };
    },
    onMessage: (message, channel, release) => {
      if (message.type === 'call') return serveCall(message, channel, release);
      release?.();
      if (message.type === 'tenant') {
        if (!set) return channel.fail(message.id, loadError ?? new TroupeError('TROUPE_ERR_MODEL_LOAD', 'the models did not load'));
        return void answerTenant(set, message).then(
          (value) => channel.reply(message.id, value),
          (err: unknown) => channel.fail(message.id, err),
        );
      }
      // Stream credit and cancel are for class actors' streams: a model replica has none to steer.
      if (
        message.type !== 'connection' &&
        message.type !== 'evictSlow' &&
        message.type !== 'streamCredit' &&
        message.type !== 'streamCancel' &&
        message.type !== 'invokeCancel'
      )
        channel.fail(message.id, new TroupeError('TROUPE_ERR_BAD_MESSAGE', 'a multiplexed replica offers no handoff'));
    },
  });
  if (!set) return;
  const spec = MultiplexSchema.parse(JSON.parse(env.TROUPE_MULTIPLEX ?? '{}'));
  // The live model directory: new files served, changed ones reloaded on their next call, removed ones refused.
  setInterval(() => set.refresh(), spec.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS).unref();
  setInterval(() => {
    const stats: ActorStats = {
      ...set.stats(),
      queued: set.queued,
      inFlight,
      totals: set.totals.totals,
      models: set.report(),
      tenantTotals: set.tenantTotals(),
    };
    const text = JSON.stringify(stats);
    if (text !== last) head?.send({ type: 'stats', stats });
    last = text;
  }, 1000).unref();
  log.info({ actor: env.TROUPE_ACTOR_ID, models: set.names.length }, 'serving a directory of models');
}

main().catch((err: unknown) => {
  process.stderr.write(`troupe actor: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
