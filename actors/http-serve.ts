import type { Socket } from 'node:net';
import {
  ShutdownGate,
  findTarget,
  inputViewsFromWire,
  mapToWire,
  relayToHead,
  serveInPlace,
  sharesMemory,
  validateInputs,
} from '../runtime/internal.js';
import type { InferTarget, InferenceBackend, InPlaceOptions, Logger, ModelMetadata, Tensor } from '../runtime/internal.js';
import type { HandoffSettings, HttpDoor } from './http-door.js';

/** Runs one call through the actor's batcher, as calls from the head and from clients do. */
export type SubmitCall = (
  inputs: Record<string, Tensor>,
  outputs: readonly string[] | undefined,
  timeoutMs: number | undefined,
) => Promise<{ outputs: Record<string, Tensor> }>;

export interface ActorHttp {
  deployment: string;
  metadata: ModelMetadata;
  submit: SubmitCall;
  /** True once the actor drains: a request then goes back to the head, which sends it to another replica. */
  stopping: () => boolean;
  log: Logger;
}

/**
 * The inference protocol on a connection handed to this actor (actors/http-door.ts), served by
 * the same code as a front-door worker's (runtime/http/), with this actor's model as the only
 * deployment: its inferences run here; reads of the protocol (health, metadata) are relayed to
 * the head; anything else (another model, the API), and every request once the actor drains, goes
 * back to the head with its connection. Inputs are checked against the model with the head's
 * messages before the batcher sees them.
 */
export function actorHttpServer(actor: ActorHttp, door: () => HttpDoor | undefined) {
  // The head's drain does not reach actors: the gate never closes; a draining actor gives connections back instead.
  const gate = new ShutdownGate();
  let relay: { port: number; ask: InPlaceOptions['relay'] } | undefined;
  return (socket: Socket, head: Buffer, settings: HandoffSettings): Socket => {
    if (relay?.port !== settings.relayPort) relay = { port: settings.relayPort, ask: relayToHead(settings.relayPort) };
    const target: InferTarget = {
      name: actor.deployment,
      kind: 'model',
      metadata: actor.metadata,
      ...(settings.labels ? { labels: settings.labels } : {}),
    };
    const backend: InferenceBackend = {
      target: (params) => findTarget(params, (name) => (name === actor.deployment ? target : undefined)),
      async run(request) {
        validateInputs(actor.deployment, actor.metadata, request.inputs, request.outputs);
        const inputs = inputViewsFromWire(request.inputs);
        const { outputs } = await actor.submit(inputs, request.outputs, request.timeoutMs);
        const wire = mapToWire(outputs);
        // The request's body goes back to the pool once answered: an output that is a view of it is copied first.
        if (!sharesMemory(outputs, inputs)) return { outputs: wire };
        return {
          outputs: Object.fromEntries(
            Object.entries(wire).map(([name, t]) => [
              name,
              { ...t, data: t.data instanceof Uint8Array ? Uint8Array.from(t.data) : t.data },
            ]),
          ),
        };
      },
    };
    return serveInPlace(socket, head, {
      backend,
      gate,
      token: settings.token,
      host: settings.host,
      maxBodyBytes: settings.maxBodyBytes,
      keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
      headersTimeoutMs: settings.headersTimeoutMs,
      log: actor.log,
      relay: relay.ask,
      serves: (route) => !actor.stopping() && route.params.name === actor.deployment,
      bodyStarted: (served) => door()?.slow.bodyStarted(served),
      requestComplete: (served) => door()?.slow.requestComplete(served),
      giveBack: (given, bytes) => {
        const d = door();
        if (d) d.giveBack(given, bytes);
        else given.destroy();
      },
    });
  };
}
