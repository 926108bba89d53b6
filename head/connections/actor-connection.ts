import { ActorToHeadSchema, Channel, HeadToActorReplies, ReplicaLink } from '../../runtime/internal.js';
import type { ActorToHead, FrameTransport, HeadToActor, Logger } from '../../runtime/internal.js';
import type { WebSocket } from 'ws';
import type { Controller } from '../control/controller.js';
import type { HandoffDoors } from '../front-door/handoff-doors.js';
import type { ActorRecord } from '../state/records.js';

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
): Channel<ActorToHead, HeadToActor, typeof HeadToActorReplies> {
  const channel: Channel<ActorToHead, HeadToActor, typeof HeadToActorReplies> = new Channel<
    ActorToHead,
    HeadToActor,
    typeof HeadToActorReplies
  >(ws, {
    replies: HeadToActorReplies,
    schema: ActorToHeadSchema,
    onMessage: (message) => {
      switch (message.type) {
        case 'ready':
          controller.actorReady(actor, link, message.metadata, message.visibleDevices, message.direct, message.modelBytes);
          // Only the connection the controller took speaks for the actor (see actorReady).
          if (message.handoff && actor.link === link) doors?.offer(actor, channel, message.handoff.name);
          return;
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
        case 'connectionClosed':
          if (actor.link === link) doors?.connectionClosed(actor.id);
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
