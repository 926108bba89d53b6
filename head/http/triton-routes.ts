import type { Params } from '../../runtime/internal.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TroupeError } from '../../runtime/internal.js';
import { loadModel, repositoryIndex, unloadModel } from '../control/model-repository.js';
import { loadTenant, tenantNamed, unloadTenant } from '../control/tenants.js';
import type { DeploymentRecord } from '../state/records.js';
import { tritonConfigOf, tritonDeployment, tritonStatsOf } from './triton-config.js';
import { bodyBuffer } from './body.js';
import type { ApiContext } from './context.js';

/**
 * Triton's extensions beyond the Open Inference Protocol's core, as Triton's own clients call them
 * (tritonclient.http: get_model_config, get_model_repository_index, load_model, unload_model,
 * get_inference_statistics): model configuration, the model repository and statistics.
 */

const DurationStatSchema = z.object({ count: z.number(), ns: z.number() });
const TensorConfigSchema = z.object({ name: z.string(), data_type: z.string(), dims: z.array(z.number()) }).loose();
const ModelConfigSchema = z
  .object({
    name: z.string(),
    platform: z.string(),
    backend: z.string(),
    max_batch_size: z.number(),
    input: z.array(TensorConfigSchema),
    output: z.array(TensorConfigSchema),
    instance_group: z.array(
      z.object({ name: z.string(), kind: z.enum(['KIND_CPU', 'KIND_GPU']), count: z.number(), gpus: z.array(z.number()) }),
    ),
    dynamic_batching: z
      .object({ preferred_batch_size: z.array(z.number()), max_queue_delay_microseconds: z.number() })
      .loose()
      .optional(),
  })
  .loose();
const ModelStatSchema = z.object({
  name: z.string(),
  version: z.string(),
  last_inference: z.number(),
  inference_count: z.number(),
  execution_count: z.number(),
  inference_stats: z.record(z.string(), DurationStatSchema),
  batch_stats: z.array(
    z.object({
      batch_size: z.number(),
      compute_input: DurationStatSchema,
      compute_infer: DurationStatSchema,
      compute_output: DurationStatSchema,
    }),
  ),
});
const StatsResponseSchema = z.object({ model_stats: z.array(ModelStatSchema) });
const RepositoryIndexSchema = z.array(
  z.object({
    name: z.string(),
    version: z.string(),
    state: z.enum(['READY', 'LOADING', 'UNAVAILABLE', 'LOADED', 'AVAILABLE']),
    reason: z.string(),
  }),
);

/** Triton's request bodies: the client sends "" for the index, `{}` or parameters for load and unload. */
const IndexRequestSchema = z.object({ ready: z.boolean().optional() }).strict();
const LoadRequestSchema = z.object({ parameters: z.record(z.string(), z.unknown()).optional() }).strict();
const UnloadRequestSchema = z.object({ parameters: z.object({ unload_dependents: z.boolean().optional() }).strict().optional() }).strict();

/** A small JSON body, or {} when there is none; refused with the reason when it does not fit. */
function jsonBody<T>(request: FastifyRequest, schema: z.ZodType<T>, what: string): T {
  const bytes = bodyBuffer(request.body);
  let value: unknown = {};
  if (bytes && bytes.length > 0) {
    try {
      value = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the ${what} body is not valid JSON`);
    }
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `the ${what} body does not fit: ${issue?.path.length ? `${issue.path.join('.')}: ` : ''}${issue?.message ?? 'invalid'}`,
    );
  }
  return parsed.data;
}

export function registerTritonRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const { docs, state, controller } = ctx;
  const tag = 'Triton extensions';

  /** The deployment and version a URL names (404 otherwise, naming only what was asked for). */
  const named = (request: FastifyRequest): DeploymentRecord => tritonDeployment(state, request.params as Params);

  for (const prefix of ['/v2/models/:name', '/v2/models/:name/versions/:version']) {
    const suffix = prefix.includes(':version') ? ' (the one version is "1")' : '';
    docs.route(
      app,
      {
        method: 'GET',
        url: `${prefix}/config`,
        tag,
        auth: 'read',
        summary: `Model configuration, in Triton's model_config shape${suffix}`,
        description:
          "max_batch_size is the deployment's batch.maxSize when it batches (dims then leave the batch axis out), else 0; instance_group counts its replicas.",
        responses: { 200: { description: 'the configuration', schema: ModelConfigSchema } },
      },
      async (request) => tritonConfigOf(state, ctx.graphs, request.params as Params),
    );
    docs.route(
      app,
      {
        method: 'GET',
        url: `${prefix}/stats`,
        tag,
        auth: 'read',
        summary: `Inference statistics of one model, in Triton's shape${suffix}`,
        description:
          "Every call the model's replicas answered, whichever way it came (HTTP, the SDK, graphs), as the actors report them about once a second. " +
          'Times run from arrival in the replica; inference_count counts rows, execution_count model executions (batches).',
        responses: { 200: { description: 'statistics', schema: StatsResponseSchema } },
      },
      async (request) => ({ model_stats: await tritonStatsOf(state, request.params as Params) }),
    );
  }

  docs.route(
    app,
    {
      method: 'GET',
      url: '/v2/models/stats',
      tag,
      auth: 'read',
      summary: "Inference statistics of every model, in Triton's shape",
      responses: { 200: { description: 'statistics', schema: StatsResponseSchema } },
    },
    async () => ({
      model_stats: [...state.deployments.values()]
        .sort((a, b) => a.spec.name.localeCompare(b.spec.name))
        .map((d) => d.stats.triton(d.spec.name)),
    }),
  );

  docs.route(
    app,
    {
      method: 'POST',
      url: '/v2/repository/index',
      tag,
      auth: 'read',
      summary: 'Every model (deployment) with its state: READY, LOADING (with the replicas not READY and why) or UNAVAILABLE (with why)',
      description:
        "Each model of a multiplexed deployment's set is listed too, as {deployment}:{model}: LOADED (the reason names the replicas, and those that pin it), " +
        'LOADING, AVAILABLE (its file is there; it loads on its first call) or UNAVAILABLE (its last load failed: the reason says why and when it is retried). ' +
        'The replicas list their directories again first, so a file added or removed shows at once.',
      body: {
        content: { 'application/json': IndexRequestSchema },
        required: false,
        description: 'optional (tritonclient sends none); {"ready": true} lists only the READY models',
      },
      responses: { 200: { description: 'the index', schema: RepositoryIndexSchema } },
    },
    async (request) => {
      const { ready } = jsonBody(request, IndexRequestSchema, 'repository index');
      return repositoryIndex(state, ctx.graphs.views(), ready === true);
    },
  );

  docs.route(
    app,
    {
      method: 'POST',
      url: '/v2/repository/models/:name/load',
      tag,
      auth: 'write',
      summary: 'Load a model: starts the replicas an unload stopped (one where it has none) and answers once they are READY',
      description:
        'A deployment is the model: create or change one with PUT /api/v1/deployments/{name}. A config override or model files in "parameters" are refused. ' +
        '{deployment}:{model} loads one model of a multiplexed set into the replica its calls go to first and pins it there (never evicted for another model) until an unload; ' +
        'a replica pins at most maxModels models. ' +
        'Past the deploy bound the answer is 504 TROUPE_ERR_DEPLOY_TIMEOUT naming the replicas not READY; the head keeps placing them.',
      body: { content: { 'application/json': LoadRequestSchema }, required: false },
      responses: { 200: { description: 'loaded (no body)' } },
    },
    async (request, reply) => {
      const { parameters } = jsonBody(request, LoadRequestSchema, 'load');
      const given = Object.keys(parameters ?? {});
      if (given.length > 0) {
        throw new TroupeError(
          'TROUPE_ERR_BAD_REQUEST',
          `load takes no parameters here (got ${given
            .slice(0, 5)
            .map((k) => `'${k.slice(0, 40)}'`)
            .join(', ')}): change a deployment's model or config with PUT /api/v1/deployments/{name}`,
        );
      }
      const tenant = tenantNamed(state, request.params as Params);
      if (tenant) await loadTenant(state, tenant);
      else await loadModel(state, controller, named(request).spec.name);
      return reply.code(200).send();
    },
  );

  docs.route(
    app,
    {
      method: 'POST',
      url: '/v2/repository/models/:name/unload',
      tag,
      auth: 'write',
      summary: 'Unload a model: its replicas finish their calls and stop; the deployment and its spec stay, UNAVAILABLE, until a load',
      description:
        '{deployment}:{model} unpins one model of a multiplexed set and takes it out of every replica once its calls are done (a later call loads it again). ' +
        'parameters.unload_dependents is accepted and changes nothing: no model depends on another in this repository (graphs name deployments, and fail with TROUPE_ERR_NOT_READY while one is unloaded).',
      body: { content: { 'application/json': UnloadRequestSchema }, required: false },
      responses: { 200: { description: 'unloaded (no body)' } },
    },
    async (request, reply) => {
      jsonBody(request, UnloadRequestSchema, 'unload');
      const tenant = tenantNamed(state, request.params as Params);
      if (tenant) await unloadTenant(state, tenant);
      else await unloadModel(state, controller, named(request).spec.name);
      return reply.code(200).send();
    },
  );
}
