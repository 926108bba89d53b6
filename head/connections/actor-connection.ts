import { ActorToHeadSchema, Channel, HeadToActorReplies, ReplicaLink, TroupeError } from '../../runtime/internal.js';
import type { ActorToHead, FrameTransport, HeadToActor, Logger } from '../../runtime/internal.js';
import type { WebSocket } from 'ws';
import type { Controller } from '../control/controller.js';
import type { HandoffDoors } from '../front-door/handoff-doors.js';
import type { ActorRecord } from '../state/records.js';

/** How long a restarted class actor's restore() may take unless its spec says (restoreTimeoutS). */
export const DEFAULT_RESTORE_TIMEOUT_S = 60;
/** Time past the actor's own restore deadline before the head stops waiting for its answer. */
const RESTORE_ANSWER_SLACK_MS = 5000;

/**
 * Serves one actor's data-plane connection (a frame stream, or a WebSocket through a TLS proxy),
 * already authenticated by its secret; returns its channel. An actor may open a new connection
 * after losing one (or after a head restart); only the one that last sent `ready` speaks for it,
 * so reports from an older or stray one are ignored.
 */
export function serveActor(
  ws: WebSocket | FrameTransport,
  actor: ActorRecord,
  controller: Controller,
  log: Logger,
  doors?: HandoffDoors,
  restoreTimeoutS?: number,
): Channel<ActorToHead, HeadToActor, typeof HeadToActorReplies> {
  const channel: Channel<ActorToHead, HeadToActor, typeof HeadToActorReplies> = new Channel<
    ActorToHead,
    HeadToActor,
    typeof HeadToActorReplies
  >(ws, {
    replies: HeadToActorReplies,
    schema: ActorToHeadSchema,
    // The head passes users' values on as they came (protocol/value-types.ts).
    forwardsValues: true,
    onMessage: (message) => {
      switch (message.type) {
        case 'ready': {
          const ready = () => {
            if (message.methods) actor.classMethods = message.methods;
            if (message.streams) actor.classStreams = message.streams;
            actor.classGroups = message.groups;
            if (message.instances) actor.instances = message.instances;
            if (message.layout) actor.layout = message.layout;
            controller.actorReady(
              actor,
              link,
              message.metadata,
              message.visibleDevices,
              message.direct,
              message.modelBytes,
              message.labels,
            );
            // Only the connection the controller took speaks for the actor (see actorReady).
            if (message.handoff && actor.link === link) doors?.offer(actor, channel, message.handoff.name);
          };
          // A class actor restarted in place of an instance that kept checkpoints gets the latest
          // before it takes a call (it ignores it if it has run calls: a rejoin keeps its state).
          // If restore() throws or outlives its deadline, the process exits and the restart that
          // follows says why. The head waits a little longer than the actor does; an actor that
          // still has not answered then (an older build, a lost reply) loses this connection, and
          // the restore starts over on its next one, so the instance never stays STARTING unasked.
          const checkpoint = actor.checkpoint;
          if (!checkpoint || actor.state !== 'STARTING') return ready();
          const timeoutMs = Math.round((restoreTimeoutS ?? DEFAULT_RESTORE_TIMEOUT_S) * 1000);
          channel
            .request({ type: 'restore', state: checkpoint.state, timeoutMs }, timeoutMs + RESTORE_ANSWER_SLACK_MS)
            .then(ready, (err: unknown) => {
              log.warn({ actor: actor.name, err: (err as Error).message }, 'a class actor could not restore its checkpoint');
              if (err instanceof TroupeError && err.code === 'TROUPE_ERR_DEADLINE_EXCEEDED') channel.terminate();
            });
          return;
        }
        case 'loadFailed':
          // Only an actor still loading can fail to load; a serving one never says so.
          if (actor.state === 'STARTING' && !actor.link) controller.actorLoadFailed(actor, message.error);
          return;
        case 'stats':
          if (actor.link === link) controller.actorStats(actor, message.stats);
          return;
        case 'connectionBack':
          if (actor.link === link) doors?.connectionBack(actor.id, message.head);
          return;
        case 'streamItem':
          if (actor.link === link) link.streamItem(message);
          return;
        case 'connectionClosed':
          if (actor.link === link) doors?.connectionClosed(actor.id);
          return;
        case 'slowConnections':
          if (actor.link === link) doors?.slowConnections(actor.id, message.count, message.oldest);
          return;
        default:
          return;
      }
    },
    onClose: () => controller.actorDisconnected(actor, link),
    onRefused: (err) => log.warn({ actor: actor.name, err: err.message }, 'actor sent a bad frame'),
  });
  const link = new ReplicaLink<ActorToHead>(channel);
  return channel;
}
