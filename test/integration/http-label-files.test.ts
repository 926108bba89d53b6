import assert from 'node:assert/strict';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, nodeCall } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * Class labels from a file beside the model, as Triton's `label_filename`: a Triton model folder
 * (model file and labels.txt side by side) under the agents' --model-dir, the spec naming the file
 * for every output or per output. Each replica reads it as it loads; classification then answers
 * "score:index:label" exactly as with the same labels given inline, through a front-door worker
 * and through the head, and the model configuration names the file.
 */

const JSON_TYPE = { 'content-type': 'application/json' };
const LABELS = ['tabby cat', 'dog', 'eel', 'fox', 'gnu', 'hen', 'ibis', 'jay', 'kiwi', 'lynx · 山猫'];
const ROWS = 2;

describe('HTTP: classification labels from a label file beside the model', { timeout: 150_000 }, () => {
  let cluster: TestCluster;
  const x = Array.from(seededFloats(ROWS * 64, 11));
  const classify = (model: string, headers: Record<string, string> = {}, agent: Agent | false = false) =>
    nodeCall(cluster.url, 'POST', `/v2/models/${model}/infer`, {
      agent,
      body: JSON.stringify({
        inputs: [{ name: 'x', shape: [ROWS, 64], datatype: 'FP32', data: x }],
        outputs: [{ name: 'logits', parameters: { classification: 10 } }],
      }),
      headers: { ...JSON_TYPE, ...headers },
    });
  const deploy = (name: string, spec: unknown) =>
    nodeCall(cluster.url, 'PUT', `/api/v1/deployments/${name}`, { body: JSON.stringify(spec), headers: JSON_TYPE });

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '1'] });
    // A Triton model folder: the model and its labels (CRLF line ends, a last newline) side by side.
    const folder = join(cluster.modelDir, 'zoo', 'classifier');
    await mkdir(folder, { recursive: true });
    await copyFile(cluster.models.mlp, join(folder, 'model.onnx'));
    await writeFile(join(folder, 'labels.txt'), `${LABELS.join('\r\n')}\r\n`);
    for (const [name, spec] of [
      ['inline', { model: 'mlp.onnx', labels: LABELS }],
      ['filed', { model: 'zoo/classifier/model.onnx', labels: 'labels.txt' }],
      ['per-output', { model: 'zoo/classifier/model.onnx', labels: { logits: 'labels.txt' } }],
    ] as const) {
      const put = await deploy(name, { ...spec, threads: 1, cpus: 0.3 });
      assert.equal(put.status, 201, put.body.toString());
    }
  });
  after(async () => {
    await cluster?.stop();
  });

  test('a label file answers "score:index:label" as the same labels inline do, through a worker and through the head', async () => {
    const inline = await classify('inline');
    assert.equal(inline.status, 200, inline.body.toString());
    const expected = (inline.json as { outputs: { data: string[] }[] }).outputs[0]!.data;
    assert.equal(expected.length, ROWS * 10);
    for (const s of expected) {
      const [, index, label] = /^-?\d+\.\d{6}:(\d+):(.*)$/.exec(s)!;
      assert.equal(label, LABELS[Number(index)], s);
    }
    // A fresh connection opening with an inference meets the worker; one opening with another request stays with the head.
    const kept = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.equal((await nodeCall(cluster.url, 'GET', '/healthz', { agent: kept })).status, 200);
      for (const model of ['filed', 'per-output']) {
        for (const [how, answer] of [
          ['worker', await classify(model)],
          ['head', await classify(model, {}, kept)],
        ] as const) {
          assert.equal(answer.status, 200, answer.body.toString());
          assert.deepEqual((answer.json as { outputs: { data: string[] }[] }).outputs[0]!.data, expected, `${model} via the ${how}`);
        }
      }
    } finally {
      kept.destroy();
    }
  });

  test("the model configuration names the file as Triton's label_filename", async () => {
    for (const model of ['filed', 'per-output']) {
      const config = await nodeCall(cluster.url, 'GET', `/v2/models/${model}/config`);
      assert.equal((config.json as { output: { label_filename: string }[] }).output[0]!.label_filename, 'labels.txt');
    }
    const inline = await nodeCall(cluster.url, 'GET', '/v2/models/inline/config');
    assert.equal((inline.json as { output: { label_filename: string }[] }).output[0]!.label_filename, '');
  });

  test('a missing file, one outside the folder, or a file for an uploaded model is refused and leaves nothing behind', async () => {
    assertError(
      await deploy('missing', { model: 'zoo/classifier/model.onnx', labels: 'nope.txt', cpus: 0.3 }),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /label file 'nope\.txt' beside model 'zoo\/classifier\/model\.onnx': not found/,
    );
    assertError(
      await deploy('escape', { model: 'zoo/classifier/model.onnx', labels: '../../secret.txt', cpus: 0.3 }),
      400,
      'TROUPE_ERR_BAD_SPEC',
      /label file is named relative to the model's folder/,
    );
    const uploaded = await nodeCall(cluster.url, 'PUT', '/api/v1/models/up', { body: await readFile(cluster.models.mlp) });
    assert.equal(uploaded.status, 201, uploaded.body.toString());
    assertError(
      await deploy('up-filed', { model: 'up', labels: 'labels.txt', cpus: 0.3 }),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /an uploaded model has no folder on the agents; give its labels as a list/,
    );
    for (const name of ['missing', 'escape', 'up-filed'])
      assert.equal((await nodeCall(cluster.url, 'GET', `/api/v1/deployments/${name}`)).status, 404, name);
  });
});
