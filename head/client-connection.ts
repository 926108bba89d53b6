import { Channel, ClientToHeadSchema, ModelDeploymentSchema, TroupeError, looksLikeGraphDocument } from '../runtime/index.js';
import type { ClientToHead, HeadToClient, Logger } from '../runtime/index.js';
import type { WebSocket } from 'ws';
import type { Controller } from './controller.js';
import type { GraphService } from './graph/service.js';
import type { ClusterState } from './state.js';

function zodSummary(issues: readonly { path: PropertyKey[]; message: string }[]): string {
  return issues.map((i) => (i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message)).join('; ');
}

/** Serves one SDK client: deploy, undeploy, run, describe; models and graphs alike. */
export function serveClient(ws: WebSocket, state: ClusterState, controller: Controller, log: Logger, graphs: GraphService): void {
  const channel: Channel<ClientToHead, HeadToClient> = new Channel<ClientToHead, HeadToClient>(ws, {
    schema: ClientToHeadSchema,
    onMessage: (message) => {
      const answer = (work: Promise<unknown>) =>
        work.then(
          (value) => channel.reply(message.id, value),
          (err: unknown) => channel.fail(message.id, err),
        );
      switch (message.type) {
        case 'run':
          // Through the graph service, so every run can be named by a later run's future.
          answer(graphs.run(message));
          return;
        case 'deploy': {
          if (looksLikeGraphDocument(message.spec)) {
            answer(graphs.deploy(message.spec));
            return;
          }
          const name = (message.spec as { name?: unknown } | null)?.name;
          if (typeof name === 'string' && graphs.has(name)) {
            channel.fail(message.id, new TroupeError('TROUPE_ERR_BAD_SPEC', `'${name}' is a graph; a deployment cannot take its name`));
            return;
          }
          const spec = ModelDeploymentSchema.safeParse(message.spec);
          if (!spec.success) {
            channel.fail(message.id, new TroupeError('TROUPE_ERR_BAD_SPEC', `invalid deployment: ${zodSummary(spec.error.issues)}`));
            return;
          }
          const ready = controller.deploy(spec.data);
          if (message.wait === false) {
            ready.catch(() => {});
            answer(Promise.resolve(controller.view(spec.data.name)));
          } else answer(ready);
          return;
        }
        case 'undeploy':
          if (graphs.has(message.name)) {
            graphs.undeploy(message.name);
            channel.reply(message.id, {});
            return;
          }
          answer(controller.undeploy(message.name).then(() => ({})));
          return;
        case 'describe':
          channel.reply(message.id, { ...state.view(), graphs: graphs.views() });
          return;
      }
    },
    onRefused: (err) => log.debug({ err: err.message }, 'client sent a bad frame'),
  });
}
