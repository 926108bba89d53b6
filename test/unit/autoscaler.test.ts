import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startAutoscaler } from '../../head/control/autoscaler.js';
import { createLogger } from '../../runtime/log.js';
import { cluster, flush } from '../helpers/controller-harness.js';

describe('the autoscaler', () => {
  test('a scale whose new replica cannot load is recorded as failed, with the reason, not only as scaled', async () => {
    const { state, controller, join, spec } = cluster();
    const { agent } = join('n1');
    const log = createLogger('test');
    log.level = 'silent';
    await controller.deploy(spec('m', 0, { autoscale: { minReplicas: 0, maxReplicas: 2, targetPerReplica: 1 } }));
    // An hour between the autoscaler's own passes: only the call below decides.
    const stop = startAutoscaler(state, controller, log, 3_600_000);
    try {
      // One call waits in a client for a deployment at zero: the first replica is asked for at once.
      state.clientLoads.report({ whenClosed: new Promise(() => {}) }, { m: { queued: 1, inFlight: 0 } });
      state.autoscaleNow(state.deployments.get('m')!);
      const start = agent.nextStart();
      start.started(1000);
      await flush();
      controller.actorLoadFailed(state.actors.get(start.order.actorId)!, {
        code: 'TROUPE_ERR_MODEL_LOAD',
        message: 'm.onnx is not a model',
      });
      await flush();
      const kinds = state.events.recent().map((e) => `${e.kind}: ${e.message}`);
      assert.ok(
        kinds.some((k) => k.startsWith('scaled: m: 0 -> 1 replicas')),
        kinds.join('\n'),
      );
      const failed = kinds.find((k) => k.startsWith('scale-failed: '));
      assert.ok(failed, `no scale-failed event among:\n${kinds.join('\n')}`);
      assert.match(failed, /^scale-failed: m: 0 -> 1 replicas failed: .*m\.onnx is not a model/);
      // The refused scale is undone: the deployment wants what it wanted before.
      assert.equal(state.deployments.get('m')?.spec.replicas, 0);
    } finally {
      stop();
      controller.close();
    }
  });
});
