import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  checkedBy,
  generateInputs,
  GenerateRequestSchema,
  GenerateResponseSchema,
  generateResponseText,
  generateValues,
  MAX_SESSION_KEY,
  MAX_STREAM_WINDOW,
  MODEL_VERSION,
  NameSchema,
  newId,
  parseJson,
  toWireError,
  TroupeError,
  unknownVersion,
} from '../../runtime/internal.js';
import type { GenerateRequest, TensorInfo, WireTensorMap } from '../../runtime/internal.js';
import { methodStepStreams } from '../calls/method-steps.js';
import { checkMethodArgs } from '../calls/actor-calls.js';
import { pickVersion, versionMap } from '../control/versions.js';
import { versionServes } from '../calls/inference.js';
import { MAX_CALL_BODY_BYTES } from './actor-routes.js';
import { itemJson } from './actor-stream-route.js';
import { INLINE_BODY_BYTES } from './body-thread.js';
import { acceptBuffers, bodyBuffer } from './body.js';
import type { ApiContext } from './context.js';
import { errorHandler } from './errors.js';
import { pumpSse } from './sse.js';
import type { SseSource } from './sse.js';

/**
 * The inference protocol's generate extension, as Triton serves it: `POST /v2/models/{name}/generate`
 * answers one JSON object, `.../generate_stream` server-sent events, one `data: {...}` per answer.
 * Three kinds of target (docs/http-api.md): a class actor whose class has a `generate` method
 * (called with the named inputs and the parameters; an async generator streams one event per
 * item), a graph (a streaming one gives an event per item), and a model deployment (one event).
 */

/** What a name answers generate requests with. */
type Target = { kind: 'class'; streams: boolean } | { kind: 'tensors'; inputs: readonly TensorInfo[]; streams: boolean };

function targetOf(ctx: ApiContext, name: string): Target {
  if (ctx.graphs.has(name)) {
    const inputs = ctx.graphs.signature(name)?.inputs;
    if (!inputs)
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `graph '${name}' takes inputs of no declared type (a fn step without a signature): call it with /infer, whose tensors say their types`,
      );
    return { kind: 'tensors', inputs, streams: ctx.graphs.streams(name) };
  }
  const d = ctx.state.deployments.get(name);
  if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no model, graph or class actor named '${name}'`);
  if (d.spec.kind === 'class') {
    const methods = d.actors.find((a) => a.classMethods)?.classMethods;
    if (!methods) throw new TroupeError('TROUPE_ERR_NOT_READY', `class actor '${name}' has no instance that has started yet`);
    if (!Object.hasOwn(methods, 'generate'))
      throw new TroupeError(
        'TROUPE_ERR_UNKNOWN_METHOD',
        `class actor '${name}' has no generate method, which generate requests call (its methods: ${Object.keys(methods).join(', ') || 'none'})`,
      );
    return { kind: 'class', streams: methodStepStreams(ctx.state, `${name}#generate`) };
  }
  if (!d.metadata) throw new TroupeError('TROUPE_ERR_NOT_READY', `'${name}' has no READY replica yet, so its inputs are not known`);
  if (d.metadata.inputs.length === 0)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `'${name}' declares no inputs (a fn without a signature): call it with /infer, whose tensors say their types`,
    );
  return { kind: 'tensors', inputs: d.metadata.inputs, streams: false };
}

/** A generate request read for `target`: its body, and for a tensors target its inputs converted (the body then without them). */
interface Read {
  target: Target;
  body: GenerateRequest;
  tensors?: WireTensorMap;
}

/**
 * Reads the body for the target the path names. A large one is parsed, checked and (for a model or
 * graph, whose declared inputs say how) converted to tensors on the body thread (body-thread.ts), so
 * 8 MiB bodies on many connections do not hold the head's event loop; a class actor's values come back as they are.
 */
async function readRequest(ctx: ApiContext, deployment: string, request: FastifyRequest): Promise<Read> {
  const target = targetOf(ctx, deployment);
  const bytes = bodyBuffer(request.body);
  const inputs = target.kind === 'tensors' ? { inputs: target.inputs } : {};
  if (bytes.byteLength > INLINE_BODY_BYTES)
    return { target, ...(await ctx.bodies.parse('generate', bytes, { target: deployment, ...inputs })) };
  const body = checkedBy(GenerateRequestSchema, parseJson(bytes.toString('utf8'), 'the generate request'), 'generate request');
  return { target, body, ...(target.kind === 'tensors' ? { tensors: generateInputs(body, target.inputs, deployment) } : {}) };
}

/** What a request's path names: the model as the answers call it, its version, and the deployment that serves it. */
interface Named {
  model: string;
  version: string;
  deployment: string;
}

/**
 * `/v2/models/{name}[/versions/{version}]`: a version pins the deployment that runs it (a rollout's
 * `{name}.{version}`, head/control/versions.ts); anything else has the one version "1".
 */
function named(ctx: ApiContext, request: FastifyRequest): Named {
  const { name, version } = request.params as { name: string; version?: string };
  if (!NameSchema.safeParse(name).success)
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `model name '${name.slice(0, 100)}' is not allowed`);
  const spec = ctx.state.deployments.get(name)?.spec;
  const versions = spec?.kind !== 'class' && spec && 'versions' in spec && spec.versions ? versionMap(spec) : undefined;
  if (version === undefined) {
    if (!versions) return { model: name, version: MODEL_VERSION, deployment: name };
    // A split deployment: the split picks the version here, so the answers can name it.
    const picked = pickVersion(spec!, (deployment) => versionServes(ctx.state, deployment));
    return { model: name, version: picked.version, deployment: picked.deployment };
  }
  const deployment = versions ? versions[version] : version === MODEL_VERSION ? name : undefined;
  if (deployment === undefined) throw unknownVersion(name, version, versions ? Object.keys(versions) : [MODEL_VERSION]);
  return { model: name, version, deployment };
}

/** The answer text of a class actor's item: an object's members are the answer's, anything else is its `text_output`. */
function valueResponseText(value: unknown, model: string, id: string | undefined, version: string): string {
  const fields = typeof value === 'object' && value !== null && !Array.isArray(value) ? value : { text_output: value };
  return itemJson({ ...fields, model_name: model, model_version: version, ...(id !== undefined ? { id } : {}) });
}

/**
 * A string `session` parameter routes the request as a sessionKey does on the actor routes: to the
 * instance that session is bound to, so a class that keeps per-session state finds it on any replica count.
 */
function sessionKeyOf(body: GenerateRequest): { sessionKey?: string } {
  const session = body.parameters?.['session'];
  if (session === undefined) return {};
  if (typeof session !== 'string' || session.length === 0 || session.length > MAX_SESSION_KEY)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `the generate request's parameters.session must be a non-empty string of at most ${MAX_SESSION_KEY} characters (it routes the request to its session's instance)`,
    );
  return { sessionKey: session };
}

/** One generate request, resolved: where its answers come from and how each is written. */
interface Generation {
  target: Target;
  /** Starts the answers of stream `id` for `caller` (see SseSource.start). */
  source: SseSource;
  text(value: unknown): string;
}

function generation(ctx: ApiContext, { model, version, deployment: name }: Named, { target, body, tensors }: Read): Generation {
  if (target.kind === 'class') {
    const args = [generateValues(body), body.parameters ?? {}];
    // Refused before the events start, as a model's inputs are.
    checkMethodArgs(name, 'generate', args);
    const sessionKey = sessionKeyOf(body);
    return {
      target,
      text: (value) => valueResponseText(value, model, body.id, version),
      source: {
        start: async (caller, id, credit, push) => {
          if (target.streams)
            return ctx.actors.stream(
              caller,
              { id, actor: name, method: 'generate', args, credit: Math.min(credit, MAX_STREAM_WINDOW), ...sessionKey },
              push,
            );
          const { value } = await ctx.actors.call({ id, actor: name, method: 'generate', args, ...sessionKey }, undefined, caller);
          push(0, value === undefined ? null : value);
          return { items: 1 };
        },
        credit: (caller, id, n) => ctx.actors.credit(caller, id, n),
        // A closed connection cancels a plain generate call as it stops a stream.
        closed: (caller) => (ctx.actors.closed(caller), ctx.actors.cancelCalls(caller)),
      },
    };
  }
  // Converted before anything starts (readRequest), so a bad input is a 400 rather than an event.
  const inputs = tensors ?? {};
  return {
    target,
    text: (value) => generateResponseText(value as WireTensorMap, model, body.id, version),
    source: {
      start: (caller, id, credit, push) => ctx.graphStreams.stream(caller, id, { deployment: name, inputs, credit }, push),
      credit: (caller, id, n) => ctx.graphStreams.credit(caller, id, n),
      closed: (caller) => ctx.graphStreams.closed(caller),
    },
  };
}

export function registerGenerateRoutes(app: FastifyInstance, ctx: ApiContext): void {
  // The bound of method calls' bodies (and a 413 that names it): a class actor's values reach the head's event loop.
  const limit = Math.min(ctx.maxBodyBytes, MAX_CALL_BODY_BYTES);
  acceptBuffers(app, limit, ctx.bodyBudget);
  app.setErrorHandler(errorHandler(ctx.log, limit));
  const tag = 'Open Inference Protocol (v2)';
  const body = {
    content: { 'application/json': GenerateRequestSchema },
    description:
      'named inputs as JSON values (a scalar, or nested arrays; fewer dimensions than the model declares get leading 1s), an optional id, and parameters',
  };
  const targets =
    "A class actor's generate(inputs, parameters) method (an async generator streams, one answer per item; an object item's members are the answer's, " +
    'any other value its text_output), a graph (a streaming graph answers per item), or a model deployment (one answer: each output by name, a scalar ' +
    'when it holds one element, else its elements flat).';

  for (const prefix of ['/v2/models/:name', '/v2/models/:name/versions/:version']) {
    // A version pins a rollout's version (the answers echo it); any other deployment has the one version "1".
    const suffix = prefix.includes(':version') ? ', one version' : '';
    ctx.docs.route(
      app,
      {
        method: 'POST',
        url: `${prefix}/generate`,
        tag,
        auth: 'inference',
        summary: `Generate (Triton's generate extension): one JSON answer${suffix}`,
        description: `${targets} A target that streams is refused (400): read it with generate_stream.`,
        body,
        responses: { 200: { description: 'the answer', schema: GenerateResponseSchema } },
      },
      async (request: FastifyRequest, reply: FastifyReply) => {
        const name = named(ctx, request);
        const g = generation(ctx, name, await readRequest(ctx, name.deployment, request));
        if (g.target.streams)
          throw new TroupeError(
            'TROUPE_ERR_BAD_REQUEST',
            `'${name.model}' streams its answers: read them with POST /v2/models/${name.model}/generate_stream`,
          );
        let answer: string | undefined;
        // Room for the one answer and the end after it: the stream is read on only while it has credit.
        await g.source.start({}, newId(), 2, (_seq, value) => (answer = g.text(value)));
        return reply
          .code(200)
          .type('application/json')
          .send(answer ?? '{}');
      },
    );

    ctx.docs.route(
      app,
      {
        method: 'POST',
        url: `${prefix}/generate_stream`,
        tag,
        auth: 'inference',
        summary: `Generate, streamed (Triton's generate extension): one server-sent event per answer${suffix}`,
        description:
          `${targets} Each answer is one \`data: {...}\` event; a failure after the events started is a last event \`data: {"error", "code"}\` ` +
          '(the status is 200 by then). The producer runs at most 16 answers ahead of what the connection has taken; closing the connection stops it.',
        body,
        responses: { 200: { description: 'the answers, as server-sent events', content: { 'text/event-stream': 'text' } } },
      },
      async (request: FastifyRequest, reply: FastifyReply) => {
        // Refused as JSON while a status can still say so; once the events start it is 200.
        const name = named(ctx, request);
        const g = generation(ctx, name, await readRequest(ctx, name.deployment, request));
        await pumpSse(
          reply,
          g.source,
          {
            contentType: 'text/event-stream; charset=utf-8',
            item: (_seq, value) => `data: ${g.text(value)}\n\n`,
            end: () => '',
            error: (err) => {
              const { code, message } = toWireError(err);
              return `data: ${JSON.stringify({ error: message, code })}\n\n`;
            },
          },
          ctx.streamIdleMs,
        );
      },
    );
  }
}
