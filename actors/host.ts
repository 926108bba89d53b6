import { statSync } from 'node:fs';
import {
  ActorEnvSchema,
  BatchSchema,
  TroupeError,
  createLogger,
  inputViewsFromWire,
  mapToWire,
  sharesMemory,
  validateInputs,
} from '../runtime/internal.js';
import type { ActorCall, ActorToHead, BatchSpec, Channel, HeadToActor, ReplicaLayout } from '../runtime/internal.js';
import { startDirectServer } from './direct-server.js';
import { directTlsFromAgent } from './direct-tls.js';
import type { DirectServer } from './direct-server.js';
import { DirectCallStats } from './direct-stats.js';
import { HttpDoor } from './http-door.js';
import { actorHttpServer } from './http-serve.js';
import { joinHead } from './head-socket.js';
import type { HeadSocket } from './head-socket.js';
import { withShownPath } from '../runtime/model-path.js';
import { loadWithLayout } from './auto-layout.js';
import type { ServedModel } from './load-model.js';
import { Batcher } from './batcher.js';
import { batchOptions } from './batch-options.js';
import { readLabelFiles } from './label-files.js';
import { ACTOR_EXIT, followAgent, readActorEnv } from './process-boot.js';

/**
 * The entry point of one model actor process. The node agent spawns it fresh (never forked from
 * a process that touched a GPU) with its identity, model and device in the environment. It loads
 * the model, runs a warm-up inference, connects to the head and answers calls until told to stop.
 * Losing the head does not end it: it reconnects (head-socket.ts) and says `ready` again, so a
 * restarted head adopts it with its model still loaded. Losing its agent (IPC) does end it.
 */
const log = createLogger('actor');

/** A file's size, or undefined when it cannot be read (the head then keeps its base estimate). */
function fileSize(path: string): number | undefined {
  try {
    return statSync(path).size;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const env = readActorEnv(ActorEnvSchema, 'actor');
  let executor: Batcher | undefined;
  let model: ServedModel | undefined;
  followAgent(() => model?.runGoingOn?.());
  let stopping = false;
  let head: HeadSocket | undefined;
  // Connections the head hands over on this host are served here (actors/http-door.ts).
  let door: HttpDoor | undefined;
  // SIGTERM drains: calls already accepted finish, new ones are refused with a retryable code,
  // and the last replies leave (the socket is closed after a flush) before the process exits.
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    void (executor?.whenIdle() ?? Promise.resolve())
      .then(() => {
        // Connections handed over end once their answers are out; their clients come back through the head.
        door?.closeAll();
        return head?.close(1000);
      })
      .then(() => process.exit(0));
  });

  /**
   * The inference thread died (actors/threaded-model.ts has failed its calls): this process can
   * serve nothing more, so it says why on stderr (the agent reports the tail as the crash's cause)
   * and exits once the failures it sent have left, as a crash would: the agent restarts it.
   */
  let threadDeath: TroupeError | undefined;
  const threadDied = (error: TroupeError) => {
    if (stopping) return;
    stopping = true;
    threadDeath = error;
    process.stderr.write(`troupe actor ${env.TROUPE_ACTOR_ID}: ${error.message}\n`);
    // The calls' failures were queued on their connections in this turn's promise callbacks.
    setImmediate(() => {
      door?.closeAll();
      void (head?.close() ?? Promise.resolve()).finally(() => process.exit(ACTOR_EXIT.THREAD_DIED));
    });
  };

  const device = env.TROUPE_DEVICE;
  let loadError: TroupeError | undefined;
  let labelLines: Record<string, string[]> | undefined;
  let layout: ReplicaLayout | undefined;
  let batch: BatchSpec | undefined;
  try {
    // Label files first: a missing one fails the load before onnxruntime spends anything on it.
    if (env.TROUPE_LABEL_FILES)
      labelLines = await readLabelFiles(env.TROUPE_LABEL_FILES, JSON.parse(env.TROUPE_SHOWN_LABEL_FILES ?? '{}') as Record<string, string>);
    const batchSpec = env.TROUPE_BATCH ? BatchSchema.safeParse(JSON.parse(env.TROUPE_BATCH)) : undefined;
    const loading = await loadWithLayout(
      env.TROUPE_MODEL_PATH,
      {
        device,
        ...(env.TROUPE_THREADS ? { threads: env.TROUPE_THREADS } : {}),
        instances: env.TROUPE_INSTANCES ?? 1,
        ...(env.TROUPE_AUTO_LAYOUT_REPLICAS !== undefined ? { autoReplicas: env.TROUPE_AUTO_LAYOUT_REPLICAS } : {}),
        ...(env.TROUPE_AUTO_REPLICAS ? { replicasChosenByHead: true } : {}),
        ...(batchSpec?.success ? { batch: batchSpec.data } : {}),
        ...(env.TROUPE_IDLE_SPIN_MS !== undefined ? { idleSpinMs: env.TROUPE_IDLE_SPIN_MS } : {}),
        mode: env.TROUPE_INFERENCE_THREAD ?? 'auto',
      },
      (error) => threadDied(error),
    );
    model = loading.model;
    layout = loading.layout;
    batch = loading.batch;
    log.info({ actor: env.TROUPE_ACTOR_ID, ...loading.layout }, 'where the model runs');
  } catch (err) {
    const full = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_MODEL_LOAD', String(err));
    // The absolute path stays in this machine's log; the head and its caller see the path as named.
    log.warn({ code: full.code, model: env.TROUPE_MODEL_PATH }, full.message);
    loadError = withShownPath(full, env.TROUPE_MODEL_PATH, env.TROUPE_SHOWN_PATH);
  }

  const loaded = model;
  const modelBytes = loaded ? fileSize(env.TROUPE_MODEL_PATH) : undefined;
  if (loaded)
    executor = new Batcher((inputs, outputs, notAfter) => loaded.run(inputs, outputs, notAfter), {
      ...batchOptions(batch, loaded),
      idleSpinMs: layout?.idleSpinMs,
    });
  const deployment = env.TROUPE_DEPLOYMENT ?? env.TROUPE_ACTOR_ID;
  const directCalls = new DirectCallStats();

  /**
   * One call, from the head or from a client calling directly. The head has checked its calls
   * against the model already; a direct call is checked here, with the same messages.
   */
  const serveCall = (
    message: ActorCall,
    channel: Pick<Channel<HeadToActor, ActorToHead>, 'send' | 'fail'>,
    direct: boolean,
    release?: () => void,
  ) => {
    if (!executor || !loaded) return release?.();
    if (stopping) {
      release?.();
      // Calls that come while the actor exits after its inference thread died get that death's error.
      channel.fail(message.id, threadDeath ?? new TroupeError('TROUPE_ERR_SHUTTING_DOWN', `actor ${env.TROUPE_ACTOR_ID} is draining`));
      return;
    }
    const arrived = performance.now();
    // Checks every tensor's bytes against its shape, as the head does first for the calls it sends.
    const inputs = inputViewsFromWire(message.inputs);
    if (direct) validateInputs(deployment, loaded.metadata, message.inputs, message.outputs);
    // The reply goes back on the connection the call came on: if that one is gone, its sender
    // has already retried the call elsewhere. Once the call has run, its input bytes (views of
    // the frame it came in) are read no more, unless an output is one of them.
    executor.submit(inputs, message.outputs, message.timeoutMs).then(
      ({ outputs, timing }) => {
        if (release && !sharesMemory(outputs, inputs)) release();
        channel.send({ type: 'reply', id: message.id, value: { outputs: mapToWire(outputs), timing } });
        if (direct) directCalls.succeeded(performance.now() - arrived);
      },
      (err: unknown) => {
        release?.();
        channel.fail(message.id, err);
      },
    );
  };

  if (loaded && executor) {
    const batcher = executor;
    const serve = actorHttpServer(
      {
        deployment,
        metadata: loaded.metadata,
        // Requests on connections handed to this actor are calls the head never sees: counted here, as direct calls are.
        submit: async (inputs, outputs, timeoutMs) => {
          const arrived = performance.now();
          const answer = await batcher.submit(inputs, outputs, timeoutMs);
          directCalls.succeeded(performance.now() - arrived);
          return answer;
        },
        stopping: () => stopping,
        log,
      },
      () => door,
    );
    door = HttpDoor.create(env.TROUPE_ACTOR_ID, serve, (message) => head?.send(message), log);
  }

  let direct: DirectServer | undefined;
  if (loaded && env.TROUPE_DATA_HOST) {
    try {
      direct = await startDirectServer(
        env.TROUPE_DATA_HOST,
        (message, channel, release) => serveCall(message, channel, true, release),
        await directTlsFromAgent(),
      );
    } catch (err) {
      // Calls still reach this actor through the head; only the shortcut is lost.
      log.warn({ actor: env.TROUPE_ACTOR_ID, host: env.TROUPE_DATA_HOST, err: (err as Error).message }, 'cannot listen for direct calls');
    }
  }
  // Totals for the head's counters and metrics, sent only when they changed (and again on each
  // connection: a restarted head starts from none).
  let last = '';
  head = joinHead({
    env,
    log,
    exitCodes: ACTOR_EXIT,
    readiness: () => {
      if (!loaded) return loadError ?? new TroupeError('TROUPE_ERR_MODEL_LOAD', 'the model did not load');
      last = '';
      return {
        type: 'ready',
        metadata: loaded.metadata,
        device,
        provider: loaded.provider,
        visibleDevices: process.env.CUDA_VISIBLE_DEVICES ?? '',
        ...(direct ? { direct: { url: direct.url, token: direct.token } } : {}),
        ...(modelBytes !== undefined ? { modelBytes } : {}),
        ...(door ? { handoff: { name: door.name } } : {}),
        ...(labelLines ? { labels: labelLines } : {}),
        ...((loaded.runners ?? 1) > 1 ? { instances: loaded.runners } : {}),
        ...(layout ? { layout } : {}),
      };
    },
    onMessage: (message, channel, release) => {
      if (message.type === 'call') return serveCall(message, channel, false, release);
      if (message.type === 'connection') {
        // Copied first: the message is a view of a pooled frame, which release lets go of.
        const bytes = Buffer.from(message.head);
        release?.();
        return door?.take(bytes);
      }
      release?.();
      if (message.type === 'evictSlow') return void door?.slow.evictOldest();
      if (message.type === 'streamCredit' || message.type === 'streamCancel' || message.type === 'invokeCancel') return;
      if (message.type === 'invoke' || message.type === 'restore') {
        channel.fail(
          message.id,
          new TroupeError('TROUPE_ERR_NOT_A_CLASS_ACTOR', `actor ${env.TROUPE_ACTOR_ID} serves a model, not a class`),
        );
        return;
      }
      if (message.type === 'tenant') {
        channel.fail(message.id, new TroupeError('TROUPE_ERR_BAD_MESSAGE', `actor ${env.TROUPE_ACTOR_ID} serves one model, not a set`));
        return;
      }
      const { type: _type, id, ...settings } = message;
      try {
        if (!door) throw new TroupeError('TROUPE_ERR_BAD_MESSAGE', 'this actor offered no handoff');
        door.open(settings);
        channel.reply(id, {});
      } catch (err) {
        channel.fail(id, err);
      }
    },
  });
  if (!executor) return;
  const batcher = executor;
  setInterval(() => {
    const stats = {
      ...batcher.stats,
      queued: batcher.queued,
      inFlight: batcher.outstanding,
      ...directCalls.report(),
      totals: batcher.totals.totals,
    };
    const text = JSON.stringify(stats);
    if (text !== last) head?.send({ type: 'stats', stats });
    last = text;
  }, 1000).unref();
  log.info({ actor: env.TROUPE_ACTOR_ID, device, provider: loaded?.provider }, 'model loaded and warmed up');
}

main().catch((err: unknown) => {
  process.stderr.write(`troupe actor: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
