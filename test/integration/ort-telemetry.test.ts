import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
/** The debug log onnxruntime's telemetry leaves for each process that creates a session. */
const debugLog = (pid: number) => `/tmp/mat-debug-${pid}.log`;
/**
 * onnxruntime keeps its telemetry off by itself where one of these is set (the names are in
 * libonnxruntime.so; with `CI` or `GITHUB_ACTIONS` set a plain process leaves no log): this test
 * unsets them, and ORT_DISABLE_TELEMETRY, for the cluster and the control alike, so that on a CI
 * runner too only the actors' own default can keep it off.
 */
const TELEMETRY_OFF_BY_ORT = [
  'ORT_DISABLE_TELEMETRY',
  'CI',
  'TF_BUILD',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'CIRCLECI',
  'TRAVIS',
  'JENKINS_URL',
  'CODEBUILD_BUILD_ID',
  'BUILDKITE',
  'TEAMCITY_VERSION',
  'APPVEYOR',
  'BITBUCKET_BUILD_NUMBER',
];
/** Spread over process.env: child_process leaves out the variables whose value is undefined. */
const UNSET_TELEMETRY_OFF: NodeJS.ProcessEnv = Object.fromEntries(TELEMETRY_OFF_BY_ORT.map((name) => [name, undefined]));

/**
 * onnxruntime 1.30 ships Microsoft telemetry (runtime/ort-telemetry.ts); actors turn it off unless
 * told otherwise. The cluster here starts with ORT_DISABLE_TELEMETRY (which this test process sets
 * for itself) and onnxruntime's CI markers removed from the environment.
 */
describe('onnxruntime telemetry in actors', { timeout: 60_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ env: UNSET_TELEMETRY_OFF });
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
    const env = { ...process.env, ...UNSET_TELEMETRY_OFF };
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
