import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, writeGraphModels } from '../helpers/graphs.js';
import { assertError, call, rawExchange } from '../helpers/http.js';
import { STREAM_STEPS, deployByRow } from '../helpers/stream-pipeline.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { tensor } from '../../runtime/internal.js';

const STEPS = STREAM_STEPS;
const TOKEN = 'generate-token-9f2e';
const AUTH = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };

/** The `data:` payloads of a server-sent event stream, parsed. */
function dataEvents(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => JSON.parse(e.slice('data: '.length)) as Record<string, unknown>);
}

/** A generate_stream request read as curl reads it: raw bytes off the socket, as they come, until `until` holds or the stream ends. */
function openStream(
  base: string,
  name: string,
  body: unknown,
): Promise<{ res: IncomingMessage; req: ClientRequest; text: () => string; ended: Promise<void> }> {
  const url = new URL(`/v2/models/${name}/generate_stream`, base);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: 'POST', headers: { ...AUTH, 'content-length': String(Buffer.byteLength(payload)) }, timeout: 60_000 },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        const ended = new Promise<void>((done) => {
          res.on('data', (chunk: string) => (text += chunk));
          res.once('end', done);
          res.once('close', done);
        });
        resolve({ res, req, text: () => text, ended });
      },
    );
    req.once('error', reject);
    req.once('timeout', () => req.destroy(new Error('no answer within 60 s')));
    req.end(payload);
  });
}

describe('HTTP: the generate extension (generate, generate_stream)', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let words: ActorHandle;
  const post = (path: string, body: unknown, headers: Record<string, string> = AUTH) =>
    call(cluster.url, 'POST', `/v2/models/${path}`, { headers, body: typeof body === 'string' ? body : JSON.stringify(body) });

  before(async () => {
    cluster = await startCluster({ headArgs: ['--token', TOKEN], agents: [[...GRAPH_AGENT, '--token', TOKEN]] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url, { token: TOKEN });
    words = await client.actor({ name: 'words', module: STEPS, export: 'Words', cpus: 0.1 });
    await client.actor({ name: 'shout', module: STEPS, export: 'Shout', cpus: 0.1 });
    await deployByRow(client);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test("a class actor's async generator generate: one data event per item over SSE; generate refuses it", async () => {
    const stream = await post('words/generate_stream', { id: 'q1', text_input: 'the quick brown fox', parameters: { max_tokens: 4 } });
    assert.equal(stream.status, 200, stream.body.toString());
    assert.equal(stream.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.deepEqual(
      dataEvents(stream.body.toString()),
      ['the', 'quick', 'brown', 'fox'].map((w, i) => ({ text_output: w, index: i, model_name: 'words', model_version: '1', id: 'q1' })),
    );
    assertError(
      await post('words/generate', { text_input: 'a b' }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /'words' streams its answers: read them with .*generate_stream/,
    );
  });

  test('a plain generate method, a model and a streaming graph', async () => {
    const shout = await post('shout/generate', { text_input: 'hello' });
    assert.equal(shout.status, 200, shout.body.toString());
    assert.deepEqual(shout.json, { text_output: 'hello!', model_name: 'shout', model_version: '1' });
    assert.deepEqual(dataEvents((await post('shout/generate_stream', { text_input: 'hi' })).body.toString()), [
      { text_output: 'hi!', model_name: 'shout', model_version: '1' },
    ]);
    // A model: the input given as one row (a batch of one), each output by name.
    const row = Array.from(seededFloats(64, 3));
    const local = await runInProcess(join(cluster.modelDir, 'member13.onnx'), { x: tensor('float32', [1, 64], Float32Array.from(row)) });
    const logits = Array.from(local.logits!.data as Float32Array);
    const answer = await post('member13/generate', { x: row });
    assert.equal(answer.status, 200, answer.body.toString());
    const got = (answer.json as { logits: number[] }).logits;
    assert.equal(got.length, 10);
    got.forEach((v, i) => assert.ok(Math.abs(v - logits[i]!) < 1e-5, `logit ${i}: ${v} vs ${logits[i]}`));
    assert.equal(dataEvents((await post('member13/generate_stream', { x: row })).body.toString()).length, 1);
    // A streaming graph: one event per row, each label a scalar.
    const rows = [row, row.map((v) => -v), row];
    const events = dataEvents((await post('by-row/generate_stream', { x: rows })).body.toString());
    assert.equal(events.length, 3);
    assert.deepEqual(events[0], events[2]);
    assert.equal(typeof events[0]!.label, 'number');
    assert.equal(events[0]!.model_name, 'by-row');
  });

  test('versioned paths: a rollout\'s version pinned and echoed, version "1" of any other deployment, an unknown version refused', async () => {
    await client.deploy({
      name: 'ro',
      cpus: 0.1,
      versions: [
        { version: 'a', model: 'member11.onnx', weight: 100 },
        { version: 'b', model: 'member12.onnx', weight: 0 },
      ],
    });
    try {
      const row = Array.from(seededFloats(64, 5));
      for (const [version, file] of [
        ['a', 'member11.onnx'],
        ['b', 'member12.onnx'],
      ] as const) {
        const local = await runInProcess(join(cluster.modelDir, file), { x: tensor('float32', [1, 64], Float32Array.from(row)) });
        const answer = await post(`ro/versions/${version}/generate`, { x: row });
        assert.equal(answer.status, 200, answer.body.toString());
        const json = answer.json as { model_name: string; model_version: string; logits: number[] };
        assert.equal(json.model_name, 'ro');
        assert.equal(json.model_version, version);
        const want = Array.from(local.logits!.data as Float32Array);
        json.logits.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) < 1e-5, `version ${version} logit ${i}: ${v} vs ${want[i]}`));
        const streamed = dataEvents((await post(`ro/versions/${version}/generate_stream`, { x: row })).body.toString());
        assert.equal(streamed.length, 1);
        assert.equal(streamed[0]!.model_version, version);
      }
      assertError(
        await post('ro/versions/c/generate', { x: row }),
        404,
        'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
        /has no version 'c' \(versions: a, b\)/,
      );
      const one = await post('shout/versions/1/generate', { text_input: 'v' });
      assert.deepEqual(one.json, { text_output: 'v!', model_name: 'shout', model_version: '1' });
      assertError(await post('shout/versions/2/generate', { text_input: 'v' }), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /has no version '2'/);
    } finally {
      await client.undeploy('ro');
    }
  });

  test('errors: before the events as JSON with a status, midway as a data event with error and code', async () => {
    assertError(
      await post('ghost/generate', { text_input: 'x' }),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /no model, graph or class actor named 'ghost'/,
    );
    assertError(await post('rows/generate', { x: 1 }), 404, 'TROUPE_ERR_UNKNOWN_METHOD', /class actor 'rows' has no generate method/);
    assertError(
      await post('member13/generate', { y: [1] }),
      400,
      'TROUPE_ERR_BAD_INPUT',
      /'member13' has no input 'y' \(its inputs: 'x'\)/,
    );
    assertError(await post('member13/generate', { x: ['a'] }), 400, 'TROUPE_ERR_BAD_TENSOR', /input 'x'/);
    assertError(await post('member13/generate', '{"x": [1,'), 400, 'TROUPE_ERR_BAD_REQUEST', /generate request/);
    assertError(await post('member13/generate', { parameters: 'no' }), 400, 'TROUPE_ERR_BAD_REQUEST', /at 'parameters'/);
    // A body past the generate endpoints' bound (8 MiB: JSON parsed on the head) is refused by its length.
    const [tooLarge] = await rawExchange(
      cluster.url,
      'POST /v2/models/member13/generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 9437184\r\n\r\n',
    );
    assert.equal(tooLarge?.status, 413);
    assert.deepEqual(tooLarge?.json, {
      error: 'the request body is larger than this head accepts (8 MiB; see --max-body-mib)',
      code: 'TROUPE_ERR_BODY_TOO_LARGE',
    });
    // Token rules of inference: on loopback none is needed (the request gets as far as its input).
    assertError(
      await post('member13/generate', { x: [1] }, { 'content-type': 'application/json' }),
      400,
      'TROUPE_ERR_BAD_INPUT',
      /input 'x'/,
    );
    const failed = dataEvents(
      (await post('words/generate_stream', { text_input: 'a b c', parameters: { fail_after: 2 } })).body.toString(),
    );
    assert.deepEqual(
      failed.slice(0, 2).map((e) => e.text_output),
      ['a', 'b'],
    );
    assert.equal(failed[2]!.code, 'TROUPE_ERR_METHOD_FAILED');
    assert.match(String(failed[2]!.error), /ran out of words.*after item 1 of the stream/);
  });

  test('a slow reader holds the generator back; closing the connection stops it', async () => {
    const before = await words.call<{ produced: number; closed: number }>('stats');
    const progress = join(cluster.modelDir, 'words-progress.txt');
    const made = async () => Number(await readFile(progress, 'utf8').catch(() => '0'));
    // 16 KiB answers: the socket's buffers hold a few hundred at most, however long the stream.
    const stream = await openStream(cluster.url, 'words', {
      text_input: 'to be or not',
      parameters: { max_tokens: 1e9, pad: 16_384, progress_file: progress },
    });
    // Read nothing: once the buffers are full, the generator must stop at its window.
    stream.res.pause();
    let last = -1;
    const held = await waitFor(
      'the generator to stop while nothing reads',
      async () => {
        const now = await made();
        const still = now > 0 && now === last;
        last = now;
        return still && now;
      },
      60_000,
      250,
    );
    assert.ok(held < 2000, `the generator made ${held} answers of 16 KiB while nothing read them`);
    // Reading again lets it go on.
    stream.res.resume();
    await waitFor('the generator to go on once read', async () => (await made()) > held + 100 && true, 60_000);
    // Closing the connection stops it: its finally runs, and the instance takes calls again.
    stream.req.destroy();
    const after = await waitFor('the generator stopped', async () => {
      const s = await words
        .withOptions({ timeoutMs: 2000 })
        .call<{ produced: number; closed: number }>('stats')
        .catch(() => undefined);
      return s && s.closed === before.closed + 1 && s;
    });
    assert.ok(after.produced - before.produced < 1e6);
  });

  test('an instance that dies mid-stream ends the events with a retryable code, after the items it gave', async () => {
    const text = (await post('words/generate_stream', { text_input: 'a b c d e', parameters: { crash_after: 3 } })).body.toString();
    const events = dataEvents(text);
    const last = events.at(-1)!;
    assert.equal(last.code, 'TROUPE_ERR_ACTOR_DIED', text);
    const items = events.slice(0, -1);
    assert.deepEqual(
      items.map((e) => e.index),
      items.map((_, i) => i),
    );
    if (items.length > 0) assert.match(String(last.error), new RegExp(`after item ${items.length - 1} of the stream`));
  });
});
