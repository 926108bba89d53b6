import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ClusterViewSchema } from '../../runtime/internal.js';
import { authHook } from './auth.js';
import { acceptBuffers, acceptSpecBuffers, acceptStreams } from './body.js';
import type { ApiContext, HttpApiOptions } from './context.js';
import { registerActorRoutes } from './actor-routes.js';
import { registerGenerateRoutes } from './generate-routes.js';
import { registerDeploymentRoutes } from './deployment-routes.js';
import { registerRolloutRoutes } from './rollout-routes.js';
import { errorHandler } from './errors.js';
import { registerJobRoutes } from './job-routes.js';
import { JobStore } from './jobs.js';
import { ModelStore } from './model-store.js';
import { registerModelRoutes } from './model-routes.js';
import { registerOipRoutes } from './oip-routes.js';
import { registerTritonRoutes } from './triton-routes.js';
import { BodyBudget, LARGE_BODIES_BYTES } from './body-budget.js';
import { BodyThread } from './body-thread.js';

/** The top of an OpenAPI 3.1 document; the rest is described by the OpenAPI specification itself. */
const OpenApiDocumentSchema = z
  .object({
    openapi: z.string(),
    info: z.object({ title: z.string(), version: z.string() }).loose(),
    paths: z.record(z.string(), z.unknown()),
  })
  .loose();

/**
 * The head's HTTP API on its fastify app: the Open Inference Protocol under /v2, deployments,
 * models and the cluster under /api/v1, and the OpenAPI description at /docs. Every error is JSON
 * (`{"error", "code"}`); unknown paths and wrong methods are the head's (head/http/not-found.ts).
 * Call once, before the app listens.
 *
 * @example
 * registerHttpApi(app, { docs, state, controller, graphs, deployments, log, host, token, dataDir, maxBodyBytes, maxModelBytes, draining: () => gate.draining });
 */
export function registerHttpApi(app: FastifyInstance, options: HttpApiOptions): void {
  // One scope for the whole API, so its hooks, error handler and body parsers stay out of the
  // routes other parts of the head register.
  void app.register(async (api) => {
    // The store keeps the blobs deployments run, and refuses to delete a model one uses.
    const deployed = () => [...options.state.deployments.values()].map((d) => ({ deployment: d.spec.name, model: d.spec.model }));
    const store = await ModelStore.open(options.dataDir, options.log, deployed);
    const ctx: ApiContext = {
      ...options,
      store,
      jobs: new JobStore(options.jobOptions),
      bodies: new BodyThread(),
      bodyBudget: new BodyBudget(Math.max(LARGE_BODIES_BYTES, options.maxBodyBytes)),
    };
    api.addHook('onRequest', authHook(options.token, options.host));
    api.setErrorHandler(errorHandler(options.log, options.maxBodyBytes));

    await api.register(async (scope) => {
      acceptBuffers(scope, options.maxBodyBytes, ctx.bodyBudget);
      registerOipRoutes(scope, ctx);
      registerTritonRoutes(scope, ctx);
      registerJobRoutes(scope, ctx);
      ctx.docs.route(
        scope,
        {
          method: 'GET',
          url: '/api/v1/cluster',
          tag: 'Cluster',
          auth: 'read',
          summary: 'Nodes (resources, GPUs), deployments and actors, and graphs',
          responses: { 200: { description: 'the cluster', schema: ClusterViewSchema } },
        },
        // The same view the SDK's describe answers, graphs included.
        async () => ({ ...options.state.view(), graphs: options.graphs.views() }),
      );
      const openapi = async () => ctx.docs.document();
      ctx.docs.route(
        scope,
        {
          method: 'GET',
          url: '/docs',
          tag: 'Docs',
          auth: 'read',
          summary: 'This OpenAPI 3.1 description (JSON)',
          responses: { 200: { description: 'OpenAPI document', schema: OpenApiDocumentSchema } },
        },
        openapi,
      );
      ctx.docs.route(
        scope,
        {
          method: 'GET',
          url: '/docs/openapi.json',
          tag: 'Docs',
          auth: 'read',
          summary: 'The same OpenAPI description, under the name tools look for',
          responses: { 200: { description: 'OpenAPI document', schema: OpenApiDocumentSchema } },
        },
        openapi,
      );
    });

    // Specs are a few KB: their own small bound, so a hostile one cannot hold the event loop.
    await api.register(async (scope) => {
      acceptSpecBuffers(scope);
      registerDeploymentRoutes(scope, ctx);
      registerRolloutRoutes(scope, ctx);
    });

    // Method calls on class actors: JSON arguments, with a bound of their own (actor-routes.ts).
    await api.register(async (scope) => registerActorRoutes(scope, ctx));
    // The generate extension: JSON inputs, with the same bound (generate-routes.ts).
    await api.register(async (scope) => registerGenerateRoutes(scope, ctx));

    // Uploads stream straight to disk instead of being buffered whole.
    await api.register(async (scope) => {
      acceptStreams(scope);
      registerModelRoutes(scope, ctx);
    });
  });
}
