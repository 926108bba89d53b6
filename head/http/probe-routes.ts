import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { readinessBody, serverReadiness } from '../control/readiness.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { ApiDocs } from './openapi.js';

/** What /readyz answers, ready or not (head/control/readiness.ts). */
export const ReadinessBodySchema = z.object({
  status: z.enum(['ready', 'not ready']),
  ready: z.boolean(),
  nodes: z.number(),
  reason: z.string().optional(),
});

/**
 * The probes of the head's process, outside the API's scope (no token, no body parsers): liveness,
 * readiness as load balancers and Kubernetes ask it, and the Prometheus exposition.
 */
export function registerProbeRoutes(app: FastifyInstance, docs: ApiDocs, state: ClusterState, draining: () => boolean): void {
  const tag = 'Probes';
  docs.route(
    app,
    {
      method: 'GET',
      url: '/healthz',
      tag,
      auth: 'read',
      summary: "Liveness: the head's event loop answers",
      responses: { 200: { description: 'live', schema: z.object({ status: z.literal('ok') }) } },
    },
    async () => ({ status: 'ok' }),
  );
  docs.route(
    app,
    {
      method: 'GET',
      url: '/metrics',
      tag,
      auth: 'read',
      summary: 'Prometheus metrics (text exposition format 0.0.4): the head, its front-door workers, deployments and actors',
      description: 'Names and meanings: docs/observability.md. Inference counters count rows, as Triton counts them.',
      responses: { 200: { description: 'the metrics', content: { 'text/plain': 'text' } } },
    },
    async (_req, reply) => reply.type(state.metrics.registry.contentType).send(await state.metrics.registry.metrics()),
  );
  // The same answer as /v2/health/ready and the status page (head/control/readiness.ts), with the status probes expect.
  docs.route(
    app,
    {
      method: 'GET',
      url: '/readyz',
      tag,
      auth: 'read',
      summary: 'Readiness: a node is ALIVE and the head is not draining (whatever any one deployment says)',
      responses: {
        200: { description: 'ready', schema: ReadinessBodySchema },
        503: { description: 'not ready, and why', schema: ReadinessBodySchema },
      },
    },
    async (_req, reply) => {
      const readiness = serverReadiness(state, draining());
      return reply.code(readiness.ready ? 200 : 503).send(readinessBody(readiness));
    },
  );
}
