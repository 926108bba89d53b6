import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { renderText, writePng } from '../../examples/ocr/font.js';
import { imageTensor } from '../../examples/ocr/image.js';
import { REC_LINES_PER_CHUNK, SAMPLE_TEXT, ocrGraph, readText, toLines, writeOcrModels } from '../../examples/ocr/ocr.js';
import { crop, decode, keepLegible, prepare } from '../../examples/ocr/steps.js';
import { connect } from '../../runtime/internal.js';
import type { Cluster, Tensor } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT } from '../helpers/graphs.js';
import { runInProcess } from '../helpers/tensors.js';
import { childEnv } from '../helpers/env.js';

const run = promisify(execFile);
const MAIN = fileURLToPath(new URL('../../examples/ocr/main.js', import.meta.url));

/**
 * Asserts two tensors are the same, element for element. Compared as typed arrays, not as number
 * lists: the recogniser's output is millions of floats.
 */
function sameTensor(served: Tensor | undefined, local: Tensor | undefined, what: string): void {
  assert.ok(served && local, `${what}: missing`);
  assert.deepEqual(served.shape, local.shape, `${what}: shape`);
  const a = served.data as Float32Array;
  const b = local.data as Float32Array;
  let differing = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) differing++;
  assert.equal(differing, 0, `${what}: ${differing} of ${a.length} elements differ`);
}

describe('examples/ocr: PP-OCRv4 detection and recognition as a pipeline', { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let models: { det: string; rec: string };

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
    models = await writeOcrModels(cluster.modelDir);
    await client.deploy(ocrGraph());
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('reads the text of an image the test draws itself, line by line in reading order', async () => {
    const { lines, trace } = await readText(client, renderText(SAMPLE_TEXT));
    assert.deepEqual(
      lines.map((l) => l.text),
      SAMPLE_TEXT,
    );
    for (const [i, line] of lines.entries()) {
      assert.ok(line.score > 0.9, `'${line.text}' read with score ${line.score}`);
      if (i > 0) assert.ok(line.box[1] > lines[i - 1]!.box[3] - 4, 'lines come top to bottom');
    }
    const steps = (trace ?? []).map((s) => s.step);
    for (const name of [
      'ocr-prepare',
      'ocr-det',
      'ocr-crop',
      'ocr-lines > ocr-read[0] > ocr-rec',
      'ocr-lines > ocr-read[0] > ocr-decode',
      'ocr-keep',
    ])
      assert.ok(steps.includes(`ocr > ${name}`), `trace has ${name}: ${steps.join(', ')}`);
  });

  test('a page of more lines than one recogniser run takes is read a few lines at a time, every line in order', async () => {
    // More lines than REC_LINES_PER_CHUNK: a page's crops in one batch could make an answer larger
    // than a frame (issue 39: a 1400x1000 screenshot's was 484 MB).
    const page = Array.from({ length: REC_LINES_PER_CHUNK * 2 + 1 }, (_, i) => `LINE ${i + 1} OF THE PAGE`);
    const { lines, trace } = await readText(client, renderText(page), 120_000);
    assert.deepEqual(
      lines.map((l) => l.text),
      page,
    );
    const chunks = (trace ?? []).filter((s) => /ocr-read\[\d+\] > ocr-rec$/.test(s.step));
    assert.equal(chunks.length, 3, `three recogniser runs: ${(trace ?? []).map((s) => s.step).join(', ')}`);
  });

  test('each step equals the same computation in-process; the models element for element', async () => {
    const image = imageTensor(renderText(SAMPLE_TEXT));
    // The steps one by one on the cluster, chained with futures on the head...
    const prepared = client.run('ocr-prepare', { image });
    const probs = client.run('ocr-det', { x: prepared });
    const cropped = client.run('ocr-crop', { image, 'sigmoid_0.tmp_0': probs });
    const recognised = client.run('ocr-rec', { x: cropped.output('x') });
    const decoded = client.run('ocr-decode', { 'softmax_11.tmp_0': recognised });
    const kept = client.run('ocr-keep', { text: decoded.output('text'), scores: decoded.output('scores'), boxes: cropped.output('boxes') });

    // ...and in this process: the fn steps called directly, the models run by onnxruntime-node.
    const x = (await prepare({ image })).x!;
    const det = await runInProcess(models.det, { x });
    const crops = await crop({ image, ...det });
    const rec = await runInProcess(models.rec, { x: crops.x! });
    const text = await keepLegible({ ...(await decode(rec)), boxes: crops.boxes! });

    sameTensor((await prepared).x, x, 'prepare x');
    sameTensor((await probs)['sigmoid_0.tmp_0'], det['sigmoid_0.tmp_0'], 'detector probability map');
    sameTensor((await cropped).x, crops.x, 'crop batch');
    assert.deepEqual([...((await cropped).boxes!.data as Int32Array)], [...(crops.boxes!.data as Int32Array)]);
    assert.deepEqual((await cropped).x!.shape.slice(0, 3), [SAMPLE_TEXT.length, 3, 48]);
    sameTensor((await recognised)['softmax_11.tmp_0'], rec['softmax_11.tmp_0'], 'recogniser output');
    assert.deepEqual(toLines(await kept), toLines(text));
    assert.deepEqual(
      toLines(text).map((l) => l.text),
      SAMPLE_TEXT,
    );
  });

  test('npm run example:ocr prints the text of a PNG file', async () => {
    const lines = ['THE QUICK BROWN FOX', 'JUMPS OVER 13 LAZY DOGS.'];
    const path = join(cluster.modelDir, 'fox.png');
    await writePng(path, renderText(lines));
    const { stdout } = await run(process.execPath, [MAIN, path], { timeout: 120_000, env: childEnv({}, 'error') });
    assert.match(stdout, /deployed 'ocr': ocr-prepare \(pid \d+\)/);
    assert.match(stdout, /fox\.png: \d+x\d+, 2 line\(s\) of text/);
    assert.ok(stdout.endsWith(`\n\n${lines.join('\n')}\n`), stdout);
  });

  test('npm run example:ocr without a path reads its sample, drawn in memory, and names no file', async () => {
    const { stdout } = await run(process.execPath, [MAIN], { timeout: 120_000, env: childEnv({}, 'error') });
    assert.match(stdout, /^no image given: reading a sample drawn with the bitmap font/);
    assert.match(stdout, /^sample: \d+x\d+, 3 line\(s\) of text/m);
    assert.doesNotMatch(stdout, /\.png|\/tmp\/|troupe-example-/, 'no path of a file that is gone when it exits');
    assert.ok(stdout.endsWith(`\n\n${SAMPLE_TEXT.join('\n')}\n`), stdout);
  });
});
