import type { ShutdownGate } from '../runtime/index.js';
import { Channel, ClientToHeadSchema, ModelDeploymentSchema, TroupeError, looksLikeGraphDocument, sharesMemory } from '../runtime/index.js';
import type { ClientToHead, FrameTransport, HeadToClient, Logger } from '../runtime/index.js';
import type { WebSocket } from 'ws';
import { DEFAULT_DEPLOY_TIMEOUT_S } from '../runtime/deploy-timeout.js';
import type { Controller } from './controller.js';
import { boundDeploy } from './deploy-bound.js';
import type { DurableStore } from './durable.js';
import { FIRST_MESSAGE_TIMEOUT_MS, FirstMessageBound } from './first-message.js';
import type { GraphService } from './graph/service.js';
import type { ClusterState } from './state.js';

function zodSummary(issues: readonly { path: PropertyKey[]; message: string }[]): string {
  return issues.map((i) => (i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message)).join('; ');
}

/**
 * Answers a client has not read yet, at most. A client that keeps sending calls but never reads
 * the answers would otherwise make the head buffer them without bound; past this it is dropped
 * (its calls fail with TROUPE_ERR_CONNECTION_CLOSED on its side, should it ever read again).
 */
export const MAX_UNREAD_BYTES = 512 * 2 ** 20;

export interface ClientServiceOptions {
  /** Refuses new work with TROUPE_ERR_SHUTTING_DOWN while the head drains. */
  gate?: ShutdownGate;
  /** Keeps deployed graph documents across a head restart. */
  store?: DurableStore | undefined;
  /** A connection that says nothing (not even `hello`) for this long is closed (default 10 s). */
  firstMessageTimeoutMs?: number | undefined;
}

/**
 * Serves one SDK client (a frame stream, or a WebSocket through a TLS proxy): deploy, undeploy,
 * run, describe; models and graphs alike. Returns its channel.
 */
export function serveClient(
  ws: WebSocket | FrameTransport,
  state: ClusterState,
  controller: Controller,
  log: Logger,
  graphs: GraphService,
  options: ClientServiceOptions = {},
): Channel<ClientToHead, HeadToClient> {
  const { gate, store } = options;
  const admit = <T>(what: string, work: () => Promise<T>): Promise<T> => (gate ? gate.run(what, work) : work());
  const timeoutMs = options.firstMessageTimeoutMs ?? FIRST_MESSAGE_TIMEOUT_MS;
  const bound = new FirstMessageBound(timeoutMs, () => log.info({ timeoutMs }, 'closing a client connection that said nothing'));
  const channel: Channel<ClientToHead, HeadToClient> = new Channel<ClientToHead, HeadToClient>(ws, {
    schema: ClientToHeadSchema,
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
      if (message.type !== 'run') release?.();
      switch (message.type) {
        case 'run': {
          // Through the graph service, so every run can be named by a later run's future.
          // The answer is queued before the call counts as done, so a draining head sends it before closing.
          // Its frame goes back to the pool once the run succeeded: every actor it went to has
          // answered, so the bytes sent on have left the process (after a failure they may still
          // sit in a socket's queue, and the frame is left to the collector).
          const run = () => {
            const work = graphs.run(message);
            if (release) work.then((a) => sharesMemory(a.outputs, message.inputs) || release(), () => {});
            return answer(work);
          };
          admit(`run '${message.deployment.slice(0, 64)}'`, run).catch((err: unknown) => channel.fail(message.id, err));
          return;
        }
        case 'deploy': {
          if (gate?.draining) {
            answer(admit('deploy', () => Promise.resolve()));
            return;
          }
          // Bounded, so a deploy that cannot be placed answers with why instead of holding the
          // call open; an SDK that predates timeoutMs gets the default.
          const timeoutMs = message.timeoutMs ?? DEFAULT_DEPLOY_TIMEOUT_S * 1000;
          if (looksLikeGraphDocument(message.spec)) {
            const doc = message.spec;
            // Kept once it deploys, even if this call stopped waiting for it first.
            answer(graphs.deploy(doc, { timeoutMs, onDeployed: (view) => store?.setGraph(view.name, doc) }));
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
            answer(Promise.resolve(state.deploymentView(state.deployments.get(spec.data.name)!)));
          } else answer(boundDeploy(ready, timeoutMs, { kind: 'deployment', name: spec.data.name }, () => {
            const d = state.deployments.get(spec.data.name);
            return d ? [state.deploymentView(d)] : [];
          }));
          return;
        }
        case 'undeploy':
          if (graphs.has(message.name)) {
            graphs.undeploy(message.name);
            store?.deleteGraph(message.name);
            channel.reply(message.id, {});
            return;
          }
          answer(controller.undeploy(message.name).then(() => ({})));
          return;
        case 'hello':
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
    onRefused: (err) => {
      bound.heard();
      log.debug({ err: err.message }, 'client sent a bad frame');
    },
  });
  bound.watch(channel);
  return channel;
}
