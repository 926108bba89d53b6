import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CHAR_VOCAB, buildCharRnn, charTokens } from '../../models/index.js';
import { TroupeError, connect, disableOrtTelemetryByDefault } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';
import { greedyTokens } from '../helpers/char-rnn-greedy.js';
import { call } from '../helpers/http.js';

// No telemetry from the reference's onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const GENERATOR = 'examples/generation/generator.js';
const PROMPT = 'Once upon a time';

/** The reference: the text greedy decoding by hand gives (test/helpers/char-rnn-greedy.ts). */
async function reference(bytes: Uint8Array, history: string, n: number): Promise<string> {
  const ids = await greedyTokens(bytes, buildCharRnn().hidden, history, n);
  return ids.map((id) => CHAR_VOCAB[id]).join('');
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** The text of a stream of one-character tokens, checking that each item is one token. */
function text(tokens: string[]): string {
  for (const t of tokens) assert.equal(t.length, 1, `the token ${JSON.stringify(t)} is not one character`);
  return tokens.join('');
}

describe('autoregressive generation: a stateful actor streaming tokens (examples/generation)', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let gen: ActorHandle;
  const model = buildCharRnn();

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
    gen = await client.actor({ name: 'gen', module: GENERATOR, export: 'Generator', cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('the token stream through the SDK equals onnxruntime in-process, step by step: same ids, same text', async () => {
    const expected = await reference(model.bytes, PROMPT, 48);
    const tokens = await collect(gen.stream<string>('generate', { prompt: PROMPT, maxTokens: 48 }));
    assert.equal(text(tokens), expected);
    assert.deepEqual(charTokens(tokens.join('')), charTokens(expected));
    // A one-token window: the instance makes each token only when the reader asks for it; the same tokens.
    assert.equal(text(await collect(gen.streamWith<string>({ window: 1 }, 'generate', { prompt: PROMPT, maxTokens: 48 }))), expected);
    assert.equal(text(await collect(gen.stream<string>('generate', { prompt: PROMPT, maxTokens: 0 }))), '');
    // The generate extension's shape of the same request: named inputs, then parameters.
    assert.equal(text(await collect(gen.stream<string>('generate', { text_input: PROMPT }, { max_tokens: 48 }))), expected);
  });

  test('over HTTP: POST /api/v1/actors/gen/generate/stream sends the same tokens as server-sent events', async () => {
    const expected = await reference(model.bytes, 'The cat', 30);
    const answer = await call(cluster.url, 'POST', '/api/v1/actors/gen/generate/stream', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ args: [{ prompt: 'The cat', maxTokens: 30 }] }),
    });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('content-type'), 'text/event-stream');
    const events = answer.body
      .toString()
      .trim()
      .split('\n\n')
      .map((e) => Object.fromEntries(e.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)])));
    const items = events.filter((e) => e.id !== undefined);
    assert.deepEqual(
      items.map((e) => e.id),
      Array.from({ length: 30 }, (_, i) => String(i)),
    );
    assert.equal(text(items.map((e) => JSON.parse(e.data!) as string)), expected);
    assert.deepEqual(events.at(-1), { event: 'end', data: '{"items":30}' });
  });

  test('over the generate extension: POST /v2/models/gen/generate_stream sends the same tokens as text_output answers', async () => {
    const post = (path: string, body: unknown) =>
      call(cluster.url, 'POST', `/v2/models/gen/${path}`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const answers = async (body: unknown) => {
      const answer = await post('generate_stream', body);
      assert.equal(answer.status, 200);
      assert.match(answer.headers.get('content-type') ?? '', /^text\/event-stream/);
      return answer.body
        .toString()
        .trim()
        .split('\n\n')
        .map((e) => {
          assert.ok(e.startsWith('data: '), e);
          return JSON.parse(e.slice('data: '.length)) as Record<string, unknown>;
        });
    };
    const expected = await reference(model.bytes, PROMPT, 20);
    const events = await answers({ id: 'g1', text_input: PROMPT, parameters: { max_tokens: 20 } });
    assert.equal(events.length, 20);
    for (const e of events) assert.deepEqual(Object.keys(e).sort(), ['id', 'model_name', 'model_version', 'text_output']);
    assert.equal(events[0]!.model_name, 'gen');
    assert.equal(events[0]!.id, 'g1');
    assert.equal(text(events.map((e) => e.text_output as string)), expected);
    // A session through the parameters: two requests are one longer generation.
    const first = await answers({ text_input: PROMPT, parameters: { max_tokens: 6, session: 'erin' } });
    const second = await answers({ text_input: '', parameters: { max_tokens: 14, session: 'erin' } });
    assert.equal(text([...first, ...second].map((e) => e.text_output as string)), expected);
    assert.equal(await gen.call('end', { session: 'erin' }), true);
    // Refused with what is wrong: an unknown parameter (as the last event, the status is 200 by then) and the one-answer route.
    const refused = await answers({ text_input: 'x', parameters: { temperature: 0.7 } });
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.code, 'TROUPE_ERR_METHOD_FAILED');
    assert.match(refused[0]!.error as string, /generate\(\) parameters: .*temperature/);
    const one = await post('generate', { text_input: 'x' });
    assert.equal(one.status, 400);
    assert.match(JSON.stringify(one.json), /read them with POST \/v2\/models\/gen\/generate_stream/);
  });

  test("over the generate extension with two instances: parameters.session routes each request to its session's instance", async () => {
    const gen2 = await client.actor({ name: 'gen2', module: GENERATOR, export: 'Generator', cpus: 0.1, replicas: 2 });
    try {
      const answers = async (body: unknown) => {
        const answer = await call(cluster.url, 'POST', '/v2/models/gen2/generate_stream', {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        assert.equal(answer.status, 200);
        return answer.body
          .toString()
          .trim()
          .split('\n\n')
          .map((e) => (JSON.parse(e.slice('data: '.length)) as { text_output: string }).text_output);
      };
      const expected = await reference(model.bytes, PROMPT, 20);
      const sessions = ['s1', 's2', 's3', 's4'];
      const firsts = await Promise.all(sessions.map((session) => answers({ text_input: PROMPT, parameters: { max_tokens: 6, session } })));
      for (const [i, session] of sessions.entries()) {
        const second = await answers({ text_input: '', parameters: { max_tokens: 14, session } });
        assert.equal(text([...firsts[i]!, ...second]), expected, `session ${session}`);
        // The head bound the session to the instance that holds its state: the SDK's session handle reaches it.
        const held = (await gen2.session(session).call('sessions')) as { session: string }[];
        assert.ok(
          held.some((h) => h.session === session),
          `${session} on its instance: ${JSON.stringify(held)}`,
        );
      }
      const bad = await call(cluster.url, 'POST', '/v2/models/gen2/generate_stream', {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text_input: 'x', parameters: { session: 7 } }),
      });
      assert.equal(bad.status, 400);
      assert.match(JSON.stringify(bad.json), /parameters\.session must be a non-empty string/);
    } finally {
      await client.undeploy('gen2');
    }
  });

  test('two sessions interleaved keep separate state; continuing one equals one longer generation', async () => {
    const alice = gen.session('alice');
    const bob = gen.session('bob');
    const a1 = text(await collect(alice.stream<string>('generate', { prompt: 'Alice said', maxTokens: 12, session: 'alice' })));
    const b1 = text(await collect(bob.stream<string>('generate', { prompt: 'Bob said', maxTokens: 12, session: 'bob' })));
    const a2 = text(await collect(alice.stream<string>('continue', { session: 'alice', maxTokens: 20 })));
    const b2 = text(await collect(bob.stream<string>('continue', { session: 'bob', prompt: ' then', maxTokens: 9 })));
    const a3 = text(await collect(alice.stream<string>('generate', { session: 'alice', maxTokens: 7 })));
    // alice's three calls are one generation of 39 tokens; bob's second call read ' then' first.
    assert.equal(a1 + a2 + a3, await reference(model.bytes, 'Alice said', 39));
    assert.equal(b1, await reference(model.bytes, 'Bob said', 12));
    assert.equal(b2, await reference(model.bytes, `Bob said${b1} then`, 9));
    const sessions = await alice.call<{ session: string; steps: number }[]>('sessions');
    assert.deepEqual(sessions.map((s) => s.session).sort(), ['alice', 'bob']);
    // alice: '\n', the prompt, and every token but the last (pending, fed by her next call).
    assert.equal(sessions.find((s) => s.session === 'alice')?.steps, 1 + 'Alice said'.length + 39 - 1);
    // Each session's state is 128 floats: what the status page's State column shows for the instance.
    await waitFor('the state size reported', async () => {
      const actor = (await client.describe()).deployments.find((d) => d.name === 'gen')?.actors[0];
      return actor?.stats?.stateBytes === 2 * 128 * 4;
    });
    assert.equal(await alice.call('end', { session: 'alice' }), true);
    await rejectsWith(
      collect(alice.stream('continue', { session: 'alice', maxTokens: 1 })),
      'TROUPE_ERR_METHOD_FAILED',
      /Generator.continue\(\) threw after 0 items: no session 'alice' on this instance/,
    );
  });

  test('leaving the loop cancels the generation: the instance stops within its window of what was read', async () => {
    const window = 4;
    const carol = gen.session('carol');
    let read = 0;
    for await (const token of carol.streamWith<string>({ window }, 'generate', { prompt: 'x', maxTokens: 4096, session: 'carol' })) {
      assert.equal(token.length, 1);
      if (++read === 10) break;
    }
    // The instance is free again (a stream holds it until it ends), and it stopped generating.
    const sessions = await carol.withOptions({ timeoutMs: 10_000 }).call<{ session: string; steps: number }[]>('sessions');
    const steps = sessions.find((s) => s.session === 'carol')!.steps;
    // '\n' and 'x', then one step per token made after the first: at most the 10 read plus the window.
    assert.ok(
      steps >= 2 + 9 && steps <= 2 + 9 + window,
      `carol's session ran ${steps} steps for 10 tokens read with a window of ${window}`,
    );
  });

  test('bad requests and a wrong model are refused with what is wrong, and the instance carries on', async () => {
    await rejectsWith(
      collect(gen.stream('generate', { prompt: 'naïve', maxTokens: 3 })),
      'TROUPE_ERR_METHOD_FAILED',
      /character U\+00EF at 2 is outside the vocabulary/,
    );
    await rejectsWith(collect(gen.stream('generate', { maxTokens: 1e6 })), 'TROUPE_ERR_METHOD_FAILED', /generate\(\): maxTokens: Too big/);
    await rejectsWith(collect(gen.stream('generate', { prompt: 'x', tokens: 3 })), 'TROUPE_ERR_METHOD_FAILED', /Unrecognized key/);
    await rejectsWith(gen.call('generate', {}), 'TROUPE_ERR_METHOD_FAILED', /returns a stream: read it with handle.stream/);
    const notOnnx = join(dirname(cluster.models.mlp), 'not-a-model.onnx');
    await writeFile(notOnnx, 'these bytes are no model');
    await rejectsWith(
      client.actor({ name: 'broken-gen', module: GENERATOR, export: 'Generator', args: [{ modelPath: notOnnx }], cpus: 0.1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /the step model is not an ONNX model/,
    );
    assert.equal(
      text(await collect(gen.stream<string>('generate', { prompt: PROMPT, maxTokens: 5 }))),
      await reference(model.bytes, PROMPT, 5),
    );
  });

  test('a killed instance fails the stream with the retryable TROUPE_ERR_ACTOR_DIED; with checkpoints, its sessions come back', async () => {
    // A model from a file (another seed), and sessions kept in the checkpoint after every call.
    const other = buildCharRnn({ seed: 5 });
    const modelPath = join(dirname(cluster.models.mlp), 'chargen5.onnx');
    await writeFile(modelPath, other.bytes);
    const durable = await client.actor({
      name: 'gen-durable',
      module: GENERATOR,
      export: 'Generator',
      args: [{ modelPath, checkpoints: true }],
      cpus: 0.1,
    });
    const dave = durable.session('dave');
    const first = text(await collect(dave.stream<string>('generate', { prompt: PROMPT, maxTokens: 10, session: 'dave' })));
    assert.equal(first, await reference(other.bytes, PROMPT, 10));
    const pidOf = async () => (await client.describe()).deployments.find((d) => d.name === 'gen-durable')?.actors[0];
    const victim = (await pidOf())!.pid!;

    const got: string[] = [];
    let failure: unknown;
    try {
      for await (const token of dave.streamWith<string>({ window: 2 }, 'continue', { session: 'dave', maxTokens: 4096 })) {
        got.push(token);
        if (got.length === 5) process.kill(victim, 'SIGKILL');
      }
    } catch (err) {
      failure = err;
    }
    assert.ok(failure instanceof TroupeError, String(failure));
    assert.equal(failure.code, 'TROUPE_ERR_ACTOR_DIED');
    assert.equal(failure.retryable, true);
    assert.match(failure.message, new RegExp(`after item ${got.length - 1} of the stream`));
    // No token was lost or repeated up to the failure: the tokens read are the reference's.
    assert.equal(text(got), (await reference(other.bytes, PROMPT, 10 + got.length)).slice(10));

    // The restarted instance restored the checkpoint of the last call that answered: dave's first 10 tokens.
    await waitFor('the instance restarted', async () => {
      const actor = await pidOf();
      return actor?.state === 'READY' && actor.pid !== victim;
    });
    const resumed = text(await collect(dave.stream<string>('continue', { session: 'dave', maxTokens: 15 })));
    assert.equal(resumed, (await reference(other.bytes, PROMPT, 25)).slice(10));
    await client.undeploy('gen-durable');
  });
});
