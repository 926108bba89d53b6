import { classCounts, classifyOutputs, encodeInferResponse, HEADER_LENGTH, InferRequestSchema } from '../../runtime/internal.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TroupeError, checkWire, isDynamic, newId, notTensorTarget, validateInputs } from '../../runtime/internal.js';
import type { WireTensorMap } from '../../runtime/internal.js';
import { bodyBuffer } from './body.js';
import type { ApiContext } from './context.js';
import { jobJson } from './jobs.js';
import { INFER_REQUEST_HEADERS } from './oip-routes.js';
import { labelsOf } from './state-backend.js';

/**
 * Async jobs over HTTP, for runs too long to hold a request open (a long graph, a big batch):
 * `POST /api/v1/deployments/{name}/jobs` takes the Open Inference Protocol request body and
 * answers 202 with the job at once; `GET /api/v1/jobs/{id}` gives its state and, once it
 * SUCCEEDED, the OIP inference response as `result`; `DELETE` cancels it (or, once finished,
 * deletes it). `{name}` is a model deployment or a graph. Jobs need the same token as inference.
 */

const JobErrorSchema = z.object({ code: z.string(), message: z.string() });
const JobViewSchema = z.object({
  id: z.string(),
  deployment: z.string(),
  state: z.enum(['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']),
  created: z.string().describe('ISO 8601'),
  started: z.string().nullable(),
  finished: z.string().nullable(),
  error: JobErrorSchema.optional().describe('when FAILED: {code, message}'),
  result: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('when SUCCEEDED: the OIP inference response ({model_name, model_version, id?, outputs})'),
});

/** Names of the outputs, in the order the deployment or graph declares them (undeclared ones last). */
function outputOrder(ctx: ApiContext, name: string, outputs: WireTensorMap, asked: string[] | undefined): string[] {
  if (asked) return asked;
  const declared =
    ctx.state.deployments.get(name)?.metadata?.outputs.map((o) => o.name) ??
    ctx.graphs
      .views()
      .find((g) => g.name === name)
      ?.outputs?.map((o) => o.name) ??
    [];
  return [...declared.filter((n) => n in outputs), ...Object.keys(outputs).filter((n) => !declared.includes(n))];
}

export function registerJobRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const { docs, state, graphs, jobs } = ctx;
  const tag = 'Jobs';

  const submit = async (request: FastifyRequest, reply: FastifyReply) => {
    const { name } = request.params as { name: string };
    const d = state.deployments.get(name);
    if (!d && !graphs.has(name)) {
      // Only what was asked for: a caller without the token must not learn the other names (as findTarget).
      throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment or graph named '${name.slice(0, 100)}'`);
    }
    // Parsed on a thread of its own, off the head's event loop (body-thread.ts).
    const { body, decoded } = await ctx.bodies.parse('job', bodyBuffer(request.body), { headerLength: request.headers[HEADER_LENGTH] });
    if (body.parameters?.binary_data_output === true || body.outputs?.some((o) => o.parameters?.binary_data === true)) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        'a job keeps its result as JSON: binary_data_output and binary_data outputs are not supported (binary inputs are)',
      );
    }
    const counts = classCounts(body);
    // A model's inputs are checked now, so a bad job is a 400 here rather than a FAILED job later.
    if (d && !graphs.has(name)) {
      if (d.spec.kind === 'class') throw notTensorTarget(name);
      for (const [input, t] of Object.entries(decoded.inputs)) checkWire(t, `input '${input}'`);
      if (d.metadata && !isDynamic({ kind: d.spec.kind === 'fn' ? 'fn' : 'model', metadata: d.metadata }))
        validateInputs(name, d.metadata, decoded.inputs, decoded.outputs);
    }
    const view = jobs.submit(name, async () => {
      // Through the graph service, as the SDK's runs: graphs and single deployments alike.
      const answer = await graphs.run({
        id: newId(),
        deployment: name,
        inputs: decoded.inputs,
        ...(decoded.outputs ? { outputs: decoded.outputs } : {}),
        ...(decoded.timeoutMs !== undefined ? { timeoutMs: decoded.timeoutMs } : {}),
      });
      const outputs = classifyOutputs(answer.outputs, counts, graphs.has(name) || !d ? undefined : labelsOf(d));
      return encodeInferResponse(name, body, outputs, outputOrder(ctx, name, answer.outputs, decoded.outputs), answer.version)
        .body as string;
    });
    return reply.code(202).header('location', `/api/v1/jobs/${view.id}`).send(view);
  };

  docs.route(
    app,
    {
      method: 'POST',
      url: '/api/v1/deployments/:name/jobs',
      tag,
      auth: 'inference',
      summary: 'Start an async job: a run of a deployment or graph, answered at once with the job (202)',
      description:
        'The body is an Open Inference Protocol inference request (JSON tensors, or binary inputs with Inference-Header-Content-Length); ' +
        'outputs must be JSON. The job is QUEUED until a run slot is free (--job-concurrency), then RUNNING, then SUCCEEDED, FAILED or CANCELLED. ' +
        'The Location header names it. 429 when too many jobs are unfinished.',
      headers: { 'inference-header-content-length': INFER_REQUEST_HEADERS['inference-header-content-length'] },
      body: {
        content: { 'application/json': InferRequestSchema, 'application/octet-stream': 'binary' },
        description:
          'as POST /v2/models/{name}/infer: JSON, or the JSON request in the first Inference-Header-Content-Length bytes and the inputs after it',
      },
      responses: { 202: { description: 'accepted', schema: JobViewSchema, headers: { location: 'the job: /api/v1/jobs/{id}' } } },
    },
    submit,
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/jobs/:id',
      tag,
      auth: 'inference',
      summary: "A job's state and, once SUCCEEDED, its result (the OIP inference response)",
      description:
        'Finished jobs are kept for --job-ttl-s seconds, and at most --max-jobs of them holding --max-job-mib of results; then 404.',
      responses: { 200: { description: 'the job', schema: JobViewSchema } },
    },
    async (request, reply) => {
      const { view, result } = jobs.get((request.params as { id: string }).id);
      return reply.code(200).type('application/json; charset=utf-8').send(jobJson(view, result));
    },
  );

  docs.route(
    app,
    {
      method: 'DELETE',
      url: '/api/v1/jobs/:id',
      tag,
      auth: 'inference',
      summary:
        'Cancel a job (a queued one never runs; a running one finishes its current calls and its outcome is dropped), or delete a finished one',
      responses: { 200: { description: 'the job after the cancel', schema: JobViewSchema } },
    },
    async (request) => jobs.cancel((request.params as { id: string }).id),
  );
}
