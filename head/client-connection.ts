import { Channel, ClientToHeadSchema, ModelDeploymentSchema, TroupeError, checkWire, validateInputs } from '../runtime/index.js';
import type { ClientToHead, HeadToClient, Logger, WireTensorMap } from '../runtime/index.js';
import type { WebSocket } from 'ws';
import type { Controller } from './controller.js';
import { routeCall } from './router.js';
import type { ClusterState } from './state.js';

type RunMessage = Extract<ClientToHead, { type: 'run' }>;

function zodSummary(issues: readonly { path: PropertyKey[]; message: string }[]): string {
  return issues.map((i) => (i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message)).join('; ');
}

/** Checks a run before any work is queued, so a bad call costs the cluster nothing. */
export async function runInference(state: ClusterState, message: Omit<RunMessage, 'id' | 'type'>): Promise<WireTensorMap> {
  const d = state.deployments.get(message.deployment);
  if (!d) {
    const known = [...state.deployments.keys()].map((n) => `'${n}'`).join(', ') || 'none';
    throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment named '${message.deployment}' (deployed: ${known})`);
  }
  for (const [name, t] of Object.entries(message.inputs)) checkWire(t, `input '${name}'`);
  if (!d.metadata) throw new TroupeError('TROUPE_ERR_NOT_READY', `deployment '${d.spec.name}' has no READY replica yet`);
  validateInputs(d.spec.name, d.metadata, message.inputs, message.outputs);
  return routeCall(d, message.inputs, {
    ...(message.outputs ? { outputs: message.outputs } : {}),
    ...(message.timeoutMs !== undefined ? { deadline: Date.now() + message.timeoutMs } : {}),
  });
}

/** Serves one SDK client: deploy, undeploy, run, describe. */
export function serveClient(ws: WebSocket, state: ClusterState, controller: Controller, log: Logger): void {
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
          answer(runInference(state, message).then((outputs) => ({ outputs })));
          return;
        case 'deploy': {
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
          answer(controller.undeploy(message.name).then(() => ({})));
          return;
        case 'describe':
          channel.reply(message.id, state.view());
          return;
      }
    },
    onRefused: (err) => log.debug({ err: err.message }, 'client sent a bad frame'),
  });
}
