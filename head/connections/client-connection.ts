import type { ShutdownGate } from '../../runtime/internal.js';
import { Channel, ClientToHeadSchema, TroupeError, sharesMemory } from '../../runtime/internal.js';
import type { ActorCalls } from '../calls/actor-calls.js';
import type { ClientToHead, FrameTransport, HeadToClient, Logger } from '../../runtime/internal.js';
import type { WebSocket } from 'ws';
import { DEFAULT_DEPLOY_TIMEOUT_S } from '../../runtime/deploy-timeout.js';
import type { DeployStarted, Deployments } from '../control/deployments.js';
import { FIRST_MESSAGE_TIMEOUT_MS, FirstMessageBound } from './first-message.js';
import { tokenlessRefusal } from './tokenless-client.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { GraphStreams } from '../graph/graph-streams.js';
import type { ClusterState } from '../state/cluster-state.js';
import { joiningActor } from '../state/record-changes.js';

/**
 * Answers a client has not read yet, at most. A client that keeps sending calls but never reads
 * the answers would otherwise make the head buffer them without bound; past this it is dropped
 * (its calls fail with TROUPE_ERR_CONNECTION_CLOSED on its side, should it ever read again).
 */
export const MAX_UNREAD_BYTES = 512 * 2 ** 20;

export interface ClientServiceOptions {
  /** Refuses new work with TROUPE_ERR_SHUTTING_DOWN while the head drains. */
  gate?: ShutdownGate;
  /** A connection that says nothing (not even `hello`) for this long is closed (default 10 s). */
  firstMessageTimeoutMs?: number | undefined;
  /** Method calls on class actors; without it such calls are refused. */
  actors?: ActorCalls;
  /** Runs read as streams (`runStream`); without it such runs are refused. */
  graphStreams?: GraphStreams;
  /**
   * The client connected without the cluster token to a head that has one, on loopback: it may
   * run inference and read, not change the cluster (tokenless-client.ts).
   */
  withoutToken?: boolean;
}

/**
 * Serves one SDK client (a frame stream, or a WebSocket through a TLS proxy): deploy, undeploy,
 * run, describe; models and graphs alike. Returns its channel.
 */
export function serveClient(
  ws: WebSocket | FrameTransport,
  state: ClusterState,
  deployments: Deployments,
  log: Logger,
  graphs: RunGateway,
  options: ClientServiceOptions = {},
): Channel<ClientToHead, HeadToClient> {
  const { gate } = options;
  const admit = <T>(what: string, work: () => Promise<T>): Promise<T> => (gate ? gate.run(what, work) : work());
  const timeoutMs = options.firstMessageTimeoutMs ?? FIRST_MESSAGE_TIMEOUT_MS;
  /** The class actor instance this client runs in, when its hello proved it (calls to itself are refused). */
  let callerActor: string | undefined;
  const bound = new FirstMessageBound(timeoutMs, () => log.info({ timeoutMs }, 'closing a client connection that said nothing'));
  const channel: Channel<ClientToHead, HeadToClient> = new Channel<ClientToHead, HeadToClient>(ws, {
    schema: ClientToHeadSchema,
    // The head passes users' values on as they came (protocol/value-types.ts).
    forwardsValues: true,
    onMessage: (message, release) => {
      bound.heard();
      const answer = (work: Promise<unknown>) =>
        work.then(
          (value) => {
            if (channel.bufferedBytes > MAX_UNREAD_BYTES) {
              log.warn({ unreadBytes: channel.bufferedBytes }, 'dropping a client that does not read its answers');
              channel.terminate();
              return;
            }
            channel.reply(message.id, value);
          },
          (err: unknown) => channel.fail(message.id, err),
        );
      // A stream's arguments are never handed back: the frame is left to the collector.
      if (message.type !== 'run' && message.type !== 'invoke' && message.type !== 'stream' && message.type !== 'runStream') release?.();
      const refused = options.withoutToken ? tokenlessRefusal(message) : undefined;
      if (refused) {
        release?.();
        channel.fail(message.id, refused);
        return;
      }
      switch (message.type) {
        case 'run': {
          // Through the graph service, so every run can be named by a later run's future.
          // The answer is queued before the call counts as done, so a draining head sends it before closing.
          // Its frame goes back to the pool once the run succeeded: every actor it went to has
          // answered, so the bytes sent on have left the process (after a failure they may still
          // sit in a socket's queue, and the frame is left to the collector).
          const run = () => {
            const work = graphs.run(message);
            if (release)
              work.then(
                (a) => sharesMemory(a.outputs, message.inputs) || release(),
                () => {},
              );
            return answer(work);
          };
          admit(`run '${message.deployment.slice(0, 64)}'`, run).catch((err: unknown) => channel.fail(message.id, err));
          return;
        }
        case 'invoke': {
          const { type: _type, ...request } = message;
          // The arguments are views of the frame: it goes back to the pool once the call is answered
          // (the instance got its own copy; a failed call may still have them queued on a socket).
          const call = () => {
            const work = options.actors
              ? options.actors.call(request, callerActor, channel)
              : Promise.reject(new TroupeError('TROUPE_ERR_INTERNAL', 'this head serves no method calls'));
            if (release)
              work.then(
                () => release(),
                () => {},
              );
            return answer(work);
          };
          admit(`call '${message.actor}.${message.method}'`, call).catch((err: unknown) => channel.fail(message.id, err));
          return;
        }
        case 'stream': {
          const { type: _type, ...request } = message;
          const open = () =>
            answer(
              options.actors
                ? options.actors.stream(
                    channel,
                    request,
                    (seq, value) => channel.send({ type: 'streamItem', stream: message.id, seq, value }),
                    callerActor,
                  )
                : Promise.reject(new TroupeError('TROUPE_ERR_INTERNAL', 'this head serves no method calls')),
            );
          admit(`stream '${message.actor}.${message.method}'`, open).catch((err: unknown) => channel.fail(message.id, err));
          return;
        }
        case 'runStream': {
          const { type: _type, id, ...request } = message;
          const open = () =>
            answer(
              options.graphStreams
                ? options.graphStreams.stream(channel, id, request, (seq, value) =>
                    channel.send({ type: 'streamItem', stream: id, seq, value }),
                  )
                : Promise.reject(new TroupeError('TROUPE_ERR_INTERNAL', 'this head serves no streamed runs')),
            );
          admit(`stream '${message.deployment.slice(0, 64)}'`, open).catch((err: unknown) => channel.fail(message.id, err));
          return;
        }
        case 'streamCredit':
          // Stream ids are the caller's call ids: one of the two services holds it.
          options.graphStreams?.credit(channel, message.stream, message.n);
          options.actors?.credit(channel, message.stream, message.n);
          channel.reply(message.id, {});
          return;
        case 'cancel':
          options.actors?.cancelCall(channel, message.call);
          channel.reply(message.id, {});
          return;
        case 'streamCancel':
          options.graphStreams?.cancel(channel, message.stream);
          options.actors?.cancel(channel, message.stream);
          channel.reply(message.id, {});
          return;
        case 'deploy': {
          if (gate?.draining) {
            void answer(admit('deploy', () => Promise.resolve()));
            return;
          }
          // Bounded, so a deploy that cannot be placed answers with why instead of holding the
          // call open; an SDK that predates timeoutMs gets the default.
          const timeoutMs = message.timeoutMs ?? DEFAULT_DEPLOY_TIMEOUT_S * 1000;
          let started: DeployStarted;
          try {
            started = deployments.deploy({ spec: message.spec, timeoutMs, replace: message.replace === true });
          } catch (err) {
            channel.fail(message.id, err);
            return;
          }
          if (message.wait === false && started.kind === 'deployment') {
            started.ready.catch(() => {});
            // Answered once the change is in the state file: a head killed next keeps it.
            void answer(
              started.saved.then(() => {
                const d = state.deployments.get(started.name);
                if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `deployment '${started.name}' was removed while deploying`);
                return state.deploymentView(d);
              }),
            );
          } else void answer(started.ready);
          return;
        }
        case 'rollout': {
          const timeoutMs = message.timeoutMs ?? DEFAULT_DEPLOY_TIMEOUT_S * 1000;
          try {
            if (message.action === 'promote' && message.version === undefined)
              throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `promote '${message.name}': name the version to promote`);
            const started =
              message.action === 'promote'
                ? deployments.promote(message.name, message.version!, timeoutMs)
                : deployments.rollback(message.name, timeoutMs);
            void answer(started.ready);
          } catch (err) {
            channel.fail(message.id, err);
          }
          return;
        }
        case 'undeploy':
          void answer(deployments.undeploy(message.name, { force: message.force === true }).then(() => ({})));
          return;
        case 'hello':
          // A client inside a class actor: its calls are known to come from that instance. A
          // wrong secret just leaves it unknown (it gains nothing from the claim either way).
          if (message.actor) callerActor = joiningActor(state, message.actor.id, message.actor.secret)?.id;
          channel.reply(message.id, {});
          return;
        case 'describe':
          channel.reply(message.id, { ...state.view(), graphs: graphs.views() });
          return;
        case 'routes':
          channel.reply(message.id, state.routes.subscribe(message.deployment, channel));
          return;
        case 'load':
          state.clientLoads.report(channel, message.loads);
          channel.reply(message.id, {});
          return;
      }
    },
    // A client that goes away stops its streams: nobody reads them any more.
    onClose: () => {
      options.actors?.closed(channel);
      options.graphStreams?.closed(channel);
    },
    onRefused: (err) => {
      bound.heard();
      log.debug({ err: err.message }, 'client sent a bad frame');
    },
  });
  bound.watch(channel);
  return channel;
}
