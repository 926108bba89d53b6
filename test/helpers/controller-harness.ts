import assert from 'node:assert/strict';
import { Controller } from '../../head/control/controller.js';
import type { ControllerOptions } from '../../head/control/controller-options.js';
import { ClusterState } from '../../head/state/cluster-state.js';
import type { ActorRecord } from '../../head/state/records.js';
import { createLogger } from '../../runtime/log.js';
import { ModelDeploymentSchema } from '../../runtime/spec.js';
import type { ModelMetadata } from '../../runtime/protocol/common.js';
import { tensor } from '../../runtime/tensor/tensor.js';
import { toWire } from '../../runtime/tensor/wire.js';
import { FakeActorLink, FakeAgent } from './fake-agent.js';
import { ManualClock } from './manual-clock.js';

// Harness of the controller's unit tests: its lifecycle rules, without processes: a real controller over real cluster
// state, with fakes only at its ports (agent connections, actor links, the clock). Time moves
// only when a test moves it, so back-off and grace periods are exact.

export const GiB = 2 ** 30;
export const META: ModelMetadata = {
  inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 4] }],
  outputs: [{ name: 'y', dtype: 'float32', shape: ['N', 4] }],
};

/** Lets promise continuations (start answers, drains) run; no timer of the manual clock moves. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** A promise's outcome as it stands, so a test can say "not yet". */
export function track<T>(p: Promise<T>): { done: boolean; value?: T; error?: unknown } {
  const t: { done: boolean; value?: T; error?: unknown } = { done: false };
  p.then(
    (value) => Object.assign(t, { done: true, value }),
    (error: unknown) => Object.assign(t, { done: true, error }),
  );
  return t;
}

export function cluster(options: Partial<ControllerOptions> = {}) {
  const clock = new ManualClock();
  const state = new ClusterState();
  const log = createLogger('test');
  log.level = 'silent';
  const controller = new Controller(state, log, { clock, ...options });

  /** A node agent registers (as agent-connection.ts does: register, answer, schedule). */
  const join = (name: string, cpus = 4, running: { actorId: string; pid: number }[] = []) => {
    const agent = new FakeAgent();
    const node = controller.nodes.agentRegistered(
      { name, address: '127.0.0.1', resources: { cpus, memoryBytes: 16 * GiB, gpus: [] } },
      running,
      agent,
    );
    controller.schedule();
    return { node, agent };
  };
  const spec = (name: string, replicas: number, extra: Record<string, unknown> = {}) =>
    ModelDeploymentSchema.parse({ name, model: `${name}.onnx`, replicas, ...extra });
  const actor = (id: string): ActorRecord => {
    const a = state.actors.get(id);
    assert.ok(a, `no actor ${id}`);
    return a;
  };
  /** The agent starts the oldest actor it was asked to, and the actor reports READY on a new link. */
  const startAndReady = async (agent: FakeAgent, pid = 1000) => {
    const start = agent.nextStart();
    start.started(pid);
    await flush();
    const a = actor(start.order.actorId);
    const link = new FakeActorLink(clock);
    controller.actorReady(a, link, META, '');
    return { a, link, order: start.order };
  };
  const actorsOf = (name: string) => state.deployments.get(name)?.actors ?? [];
  const states = (name: string) => actorsOf(name).map((a) => `${a.name} ${a.state}`);
  return { clock, state, controller, join, spec, actor, startAndReady, actorsOf, states };
}

export const exit = (code: number, stderrTail = '') => ({ code, signal: null, stderrTail });
export const input = () => ({ x: toWire(tensor('float32', [1, 4], new Float32Array(4))) });
