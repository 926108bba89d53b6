import { ActorToHeadSchema, Channel } from '../runtime/index.js';
import type { ActorToHead, HeadToActor, Logger } from '../runtime/index.js';
import type { WebSocket } from 'ws';
import { ActorLink } from './actor-link.js';
import type { Controller } from './controller.js';
import type { ActorRecord } from './state.js';

/** Serves one actor's data-plane socket, already authenticated by its secret. */
export function serveActor(ws: WebSocket, actor: ActorRecord, controller: Controller, log: Logger): void {
  const channel: Channel<ActorToHead, HeadToActor> = new Channel<ActorToHead, HeadToActor>(ws, {
    schema: ActorToHeadSchema,
    onMessage: (message) => {
      switch (message.type) {
        case 'ready':
          controller.actorReady(actor, link, message.metadata, message.visibleDevices);
          return;
        case 'loadFailed':
          controller.actorLoadFailed(actor, message.error);
          return;
        case 'stats':
          controller.actorStats(actor, message.stats);
          return;
        default:
          return;
      }
    },
    onRefused: (err) => log.warn({ actor: actor.name, err: err.message }, 'actor sent a bad frame'),
  });
  const link = new ActorLink(channel);
}
