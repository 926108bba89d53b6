import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/index.js';
import type { Cluster } from '../../runtime/index.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
/** The debug log onnxruntime's telemetry leaves for each process that creates a session. */
const debugLog = (pid: number) => `/tmp/mat-debug-${pid}.log`;

/**
 * onnxruntime 1.30 ships Microsoft telemetry (runtime/ort-telemetry.ts); actors turn it off unless
 * told otherwise. The cluster here starts with ORT_DISABLE_TELEMETRY removed from the environment
 * (this test process sets it for itself), so only the actors' own default can keep it off.
 */
describe('onnxruntime telemetry in actors', { timeout: 60_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ env: { ORT_DISABLE_TELEMETRY: undefined } });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('is off by default: an actor leaves no telemetry log, where a plain onnxruntime process does', async () => {
    const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    const pid = view.actors[0]!.pid!;
    assert.equal(existsSync(debugLog(pid)), false, `actor ${pid} left ${debugLog(pid)}`);
    // The control: the same model in a process of onnxruntime alone, with the variable unset,
    // does leave one (so the check above means something on this onnxruntime), removed after.
    const env = { ...process.env };
    delete env.ORT_DISABLE_TELEMETRY;
    const script = `require('onnxruntime-node').InferenceSession.create(${JSON.stringify(cluster.models.mlp)}).then(() => console.log(process.pid))`;
    const control = spawnSync(process.execPath, ['-e', script], { cwd: REPO, env, encoding: 'utf8', timeout: 30_000 });
    assert.equal(control.status, 0, control.stderr);
    const controlPid = Number(control.stdout.trim());
    try {
      assert.ok(existsSync(debugLog(controlPid)), 'onnxruntime with telemetry on leaves its debug log');
    } finally {
      rmSync(debugLog(controlPid), { force: true });
    }
  });
});
