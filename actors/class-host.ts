import {
  ClassActorEnvSchema,
  ClassArgsSchema,
  ConcurrencyGroupsSchema,
  TroupeError,
  createLogger,
  disableOrtTelemetryByDefault,
  readActorReferencesWith,
} from '../runtime/internal.js';
import type { ClassActorEnv, ConcurrencyGroups, InvokeReply } from '../runtime/internal.js';
import { withShownPath } from '../runtime/model-path.js';
import { ClassInstance } from './class-instance.js';
import { CallContexts } from './call-context.js';
import { refusingExit } from './exit-guard.js';
import { StreamCredit } from './stream-credit.js';
import { joinHead } from './head-socket.js';
import type { HeadSocket } from './head-socket.js';
import { ACTOR_EXIT, followAgent, readActorEnv } from './process-boot.js';

/**
 * The entry point of one class actor: a process holding one instance of a user's class (from a
 * module the agent resolved inside its --module-dir), whose methods the head calls by name, one
 * at a time (or up to the spec's maxConcurrency at once). Placed, supervised and restarted like a model actor; after a restart the head hands
 * it the last checkpoint of the instance it replaces before any call (docs/actors.md). Like every
 * actor it outlives a lost head connection and rejoins with its state (head-socket.ts).
 */
const log = createLogger('class-actor');
// A user's class may run onnxruntime itself: no telemetry from it either (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

/**
 * `work`, or a rejection once `timeoutMs` passed: a restore() that never settles would otherwise
 * hold the instance STARTING forever, since its process stays alive and answers the agent's pings.
 */
function withDeadline(work: Promise<void>, timeoutMs: number | undefined, who: string): Promise<void> {
  if (timeoutMs === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TroupeError('TROUPE_ERR_MODEL_LOAD', `${who} did not settle within ${timeoutMs / 1000} s (restoreTimeoutS)`)),
      timeoutMs,
    );
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** The constructor's arguments from the environment (the head checked them as part of the spec; checked again here). */
function readArgs(env: ClassActorEnv): unknown[] {
  let raw: unknown;
  try {
    raw = JSON.parse(env.TROUPE_CLASS_ARGS);
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `the class's args are not JSON: ${(err as Error).message}`);
  }
  const args = ClassArgsSchema.safeParse(raw);
  if (!args.success) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `the class's args are invalid: ${args.error.issues[0]?.message}`);
  return args.data;
}

/** The spec's concurrency groups from the environment (the head checked them; checked again here). */
function readGroups(env: ClassActorEnv): ConcurrencyGroups | undefined {
  if (env.TROUPE_CONCURRENCY_GROUPS === undefined) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(env.TROUPE_CONCURRENCY_GROUPS);
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `the spec's concurrencyGroups are not JSON: ${(err as Error).message}`);
  }
  const groups = ConcurrencyGroupsSchema.safeParse(raw);
  if (!groups.success)
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `the spec's concurrencyGroups are invalid: ${groups.error.issues[0]?.message}`);
  return groups.data;
}

async function main(): Promise<void> {
  const env = readActorEnv(ClassActorEnvSchema, 'class actor');
  const shown = env.TROUPE_SHOWN_PATH ?? env.TROUPE_CLASS_MODULE;
  followAgent();

  let instance: ClassInstance | undefined;
  let loadError: TroupeError | undefined;
  const contexts = new CallContexts({
    headUrl: env.TROUPE_HEAD_URL,
    deployment: env.TROUPE_DEPLOYMENT ?? env.TROUPE_CLASS_EXPORT,
    instance: env.TROUPE_ACTOR_ID,
  });
  // An ActorHandle passed in as a value arrives as a handle on this instance's own client.
  readActorReferencesWith((ref) => contexts.handle(ref));
  try {
    instance = await refusingExit(shown, () =>
      ClassInstance.create(
        env.TROUPE_CLASS_MODULE,
        shown,
        env.TROUPE_CLASS_EXPORT,
        readArgs(env),
        { maxConcurrency: env.TROUPE_MAX_CONCURRENCY, groups: readGroups(env) },
        contexts,
      ),
    );
  } catch (err) {
    const full = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_MODEL_LOAD', String(err));
    // The absolute path stays in this machine's log; the head and its caller see the path as named.
    log.warn({ code: full.code, module: env.TROUPE_CLASS_MODULE }, full.message);
    loadError = withShownPath(full, env.TROUPE_CLASS_MODULE, env.TROUPE_SHOWN_PATH);
  }

  let stopping = false;
  let head: HeadSocket | undefined;
  if (instance && env.TROUPE_MAX_CALL_MS !== undefined)
    instance.boundCalls(env.TROUPE_MAX_CALL_MS, (why) => {
      if (stopping) return;
      // The overrun call is answered first (its fail leaves in this turn's frame); calls behind it
      // fail with TROUPE_ERR_ACTOR_DIED when the process goes, and the restart restores the checkpoint.
      stopping = true;
      process.stderr.write(`${why.message}\n`);
      setTimeout(() => process.exit(ACTOR_EXIT.CALL_OVERRAN), 200);
    });
  /** The credit of each streaming call in progress, by call id. */
  const streams = new Map<string, StreamCredit>();
  /** What cancels each call in progress (a plain call or a stream), by call id: its context's signal. */
  const cancels = new Map<string, AbortController>();
  // SIGTERM drains: calls already accepted finish, new ones are refused with a retryable code,
  // and the last replies leave (the socket is closed after a flush) before the process exits.
  const exitClean = () => void Promise.all([head?.close(1000), contexts.close()]).then(() => process.exit(0));
  let idle: (() => void) | undefined;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    if (!instance || instance.queued === 0) exitClean();
    else idle = exitClean;
  });

  head = joinHead({
    env,
    log,
    exitCodes: ACTOR_EXIT,
    readiness: () =>
      instance
        ? {
            type: 'ready',
            metadata: { inputs: [], outputs: [] },
            device: 'cpu',
            provider: 'class',
            visibleDevices: process.env.CUDA_VISIBLE_DEVICES ?? '',
            methods: instance.signatures,
            streams: [...instance.streaming],
            ...(instance.groups ? { groups: instance.groups } : {}),
          }
        : (loadError ?? new TroupeError('TROUPE_ERR_MODEL_LOAD', 'the class did not load')),
    // The frame a call came in is never handed back (release is not called): the instance may
    // keep its arguments, byte arrays included, as state.
    onMessage: (message, channel) => {
      if (!instance) return;
      const it = instance;
      const done = () => {
        if (it.queued === 0) idle?.();
      };
      switch (message.type) {
        case 'invoke': {
          if (stopping) {
            channel.fail(message.id, new TroupeError('TROUPE_ERR_SHUTTING_DOWN', `actor ${env.TROUPE_ACTOR_ID} is draining`));
            return;
          }
          let work: Promise<InvokeReply>;
          const cancel = new AbortController();
          const id = message.id;
          cancels.set(id, cancel);
          if (message.credit !== undefined) {
            // A streaming call: items go out as the generator yields them, while the head's credit lasts.
            const credit = new StreamCredit(message.credit);
            streams.set(message.id, credit);
            work = it.stream(
              message.method,
              message.args,
              credit,
              (seq, value) => channel.send({ type: 'streamItem', stream: id, seq, value }),
              message.tensors === true,
              cancel.signal,
              message.group,
            );
            void work.finally(() => streams.delete(id)).catch(() => {});
            // A head that is gone grants nothing more: stop the generator instead of holding the instance.
            void channel.whenClosed.then(() => credit.cancel());
          } else {
            // The chain of instances waiting on this call and its deadline, for the calls its method makes.
            const origin = message.via
              ? {
                  via: message.via,
                  groups: message.viaGroups,
                  deadline: message.timeoutMs === undefined ? undefined : Date.now() + message.timeoutMs,
                }
              : undefined;
            work = it.invoke(message.method, message.args, message.tensors === true, cancel.signal, origin, message.group);
          }
          void work.finally(() => cancels.delete(id)).catch(() => {});
          work.then(
            (reply) => (channel.reply(message.id, reply), done()),
            (err: unknown) => (channel.fail(message.id, err), done()),
          );
          return;
        }
        case 'streamCredit':
          streams.get(message.stream)?.grant(message.n);
          return;
        case 'streamCancel':
          streams.get(message.stream)?.cancel();
          cancels.get(message.stream)?.abort(new TroupeError('TROUPE_ERR_CANCELLED', 'the stream was cancelled by its reader'));
          return;
        case 'invokeCancel':
          cancels
            .get(message.call)
            ?.abort(new TroupeError('TROUPE_ERR_CANCELLED', `call ${message.call} was cancelled by its caller before it ran`));
          return;
        case 'restore':
          withDeadline(it.restore(message.state), message.timeoutMs, `${it.className}.restore()`).then(
            () => channel.reply(message.id, {}),
            (err: unknown) => {
              const why =
                err instanceof TroupeError ? err.message : `${it.className}.restore() threw: ${(err as Error)?.message ?? String(err)}`;
              channel.fail(message.id, new TroupeError('TROUPE_ERR_MODEL_LOAD', why));
              process.stderr.write(`${why}\n`);
              // A half-restored instance must take no calls: exit, and the restart says why.
              setTimeout(() => process.exit(ACTOR_EXIT.RESTORE_FAILED), 200);
            },
          );
          return;
        default:
          // Tensor calls and handoffs are for model actors.
          channel.fail(
            message.type === 'connection' || message.type === 'evictSlow' ? null : message.id,
            new TroupeError('TROUPE_ERR_BAD_REQUEST', `actor ${env.TROUPE_ACTOR_ID} is a class actor: it takes method calls, not tensors`),
          );
      }
    },
  });
  if (!instance) return;
  const it = instance;
  // Totals for the head's counters and the status page, sent only when they changed.
  let last = '';
  setInterval(() => {
    const s = it.stats;
    const stats = {
      calls: s.calls,
      batches: s.calls,
      rows: 0,
      expired: 0,
      failed: s.failed,
      computeMs: s.computeMs,
      queueMs: 0,
      queued: s.queued,
      inFlight: s.queued,
      ...(s.stateBytes !== undefined ? { stateBytes: s.stateBytes } : {}),
      ...(s.groups ? { groups: s.groups } : {}),
    };
    const text = JSON.stringify(stats);
    if (text !== last) head?.send({ type: 'stats', stats });
    last = text;
  }, 1000).unref();
  log.info({ actor: env.TROUPE_ACTOR_ID, class: it.className, methods: it.methods }, 'class instance built');
}

main().catch((err: unknown) => {
  process.stderr.write(`troupe class actor: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
