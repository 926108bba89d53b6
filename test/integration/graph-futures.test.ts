import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { connect, decodeFrame, encodeFrame, fn, model, pipeline, tensor, toWire } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { FNS, GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

describe('futures: run returns at once; a future is an input resolved on the head', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const x = tensor('float32', [3, 64], seededFloats(3 * 64, 77));

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    for (const name of ['link21', 'member11']) await client.deploy({ name, model: `${name}.onnx`, threads: 1 });
    await client.deploy(fn('sleepy', `${FNS}#sleepy`));
    await client.deploy(fn('counter', `${FNS}#counter`));
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a future passed as an input of the next run, before it has finished', async () => {
    const first = client.run('link21', { x });
    const second = client.run('member11', { x: first }); // sent now; the head waits for `first`
    const a = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x });
    const b = await runInProcess(join(cluster.modelDir, 'member11.onnx'), { x: a.logits! });
    assert.deepEqual(floats((await second).logits), floats(b.logits));
    assert.deepEqual(floats((await first).logits), floats(a.logits), 'the first run still answers its own caller');
  });

  test('the head resolves the reference itself: a raw client that never reads the first answer still gets the second', async () => {
    const ws = new WebSocket(new URL('/v1/client', cluster.url.replace('http', 'ws')));
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
    const answers: Record<string, unknown>[] = [];
    ws.on('message', (data: Buffer) => answers.push(...(decodeFrame(data) as Record<string, unknown>[])));
    // Both requests in one frame: the second names the first by id, no round trip between them.
    ws.send(
      encodeFrame([
        { type: 'run', id: 'run-a', deployment: 'link21', inputs: { x: toWire(x) } },
        { type: 'run', id: 'run-b', deployment: 'member11', inputs: {}, refs: { x: { run: 'run-a', output: 'logits' } } },
      ]),
    );
    const deadline = Date.now() + 10_000;
    while (!answers.some((m) => m.id === 'run-b') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    ws.close();
    const b = answers.find((m) => m.id === 'run-b');
    assert.equal(b?.type, 'reply', JSON.stringify(b?.error));
    const logits = (b!.value as { outputs: { logits: { data: Uint8Array } } }).outputs.logits;
    const local = await runInProcess(join(cluster.modelDir, 'member11.onnx'), {
      x: (await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x })).logits!,
    });
    assert.deepEqual([...new Float32Array(new Uint8Array(logits.data).buffer)], floats(local.logits));
  });

  test('future.output(name) picks one output; graphs take futures too', async () => {
    await client.deploy(pipeline('both', [model('link21'), model('member11')]));
    const first = client.run('link21', { x });
    const out = await client.run('both', { x: first.output('logits') });
    const a = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x });
    const b = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x: a.logits! });
    const c = await runInProcess(join(cluster.modelDir, 'member11.onnx'), { x: b.logits! });
    assert.deepEqual(floats(out.logits), floats(c.logits));
    // A graph takes a single future under any name when its first step takes a single input.
    const again = await client.run('both', { input: client.run('link21', { x }) });
    assert.deepEqual(floats(again.logits), floats(c.logits));
    await rejectsWith(
      client.run('member11', { x: first.output('probs') }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x' refers to output 'probs' of run '\w+', which has outputs 'logits'/,
    );
  });

  test('a failed run fails the runs that take its future, with its code; an unknown run is refused', async () => {
    const bad = client.run('link21', { x: tensor('float32', [1, 3], new Float32Array(3)) });
    await rejectsWith(
      client.run('member11', { x: bad }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x' comes from run '\w+', which failed: input 'x': expected float32\[N,64\]/,
    );
    await rejectsWith(bad, 'TROUPE_ERR_BAD_INPUT', /expected float32\[N,64\]/);
    const ws = new WebSocket(new URL('/v1/client', cluster.url.replace('http', 'ws')));
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
    const answer = new Promise<Record<string, unknown>>((resolve) =>
      ws.once('message', (data: Buffer) => resolve(decodeFrame(data)[0] as Record<string, unknown>)),
    );
    ws.send(encodeFrame([{ type: 'run', id: 'orphan', deployment: 'member11', inputs: {}, refs: { x: { run: 'never-sent' } } }]));
    const fail = await answer;
    ws.close();
    assert.equal(fail.type, 'fail');
    assert.equal((fail.error as { code: string }).code, 'TROUPE_ERR_UNKNOWN_RUN');
    assert.match((fail.error as { message: string }).message, /input 'x' refers to run 'never-sent', which this head does not hold/);
  });

  test('a deadline fails the run and cancels the steps not yet started', async () => {
    await client.deploy(pipeline('late', [fn('sleepy'), fn('counter')]));
    const ms = tensor('float32', [1], Float32Array.of(400));
    await rejectsWith(client.run('late', { ms, x }, { timeoutMs: 150 }), 'TROUPE_ERR_DEADLINE_EXCEEDED', /deadline/);
    // A second sleep on the same actor ends after the first one did; had the pipeline gone on,
    // its 'counter' call would have been sent when the first sleep ended, before this returns.
    await client.run('sleepy', { ms, x });
    const { calls } = await client.run('counter', {});
    assert.deepEqual([...(calls!.data as Int32Array)], [1], "the pipeline's counter step never ran");
  });
});
