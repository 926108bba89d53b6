import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { TroupeError, VersionSchema, formatIssues } from '../../runtime/internal.js';
import type { ApiContext } from './context.js';
import { bodyBuffer, parseDocument } from './body.js';
import { DeploymentDetailSchema, DeploymentWaitingSchema, answerDeployment, deploymentName, queryFlags } from './deployment-routes.js';

/**
 * Ending a rollout in one call: every call of a deployment split between versions goes to one
 * version, and the other versions' replicas stop once the calls already sent to them are served.
 * Changing the weights themselves is a PUT of the deployment with new `versions`.
 */

const PromoteSchema = z.object({ version: VersionSchema.shape.version }).strict();

export function registerRolloutRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const tag = 'Deployments';
  const query = {
    wait: 'false: answer at once with 202 (default true)',
    timeoutS: 'seconds to wait for READY before answering 202 with the reasons',
  };
  const responses = {
    200: { description: 'READY: every call now goes to the one version', schema: DeploymentDetailSchema },
    202: { description: 'accepted, still deploying', schema: DeploymentWaitingSchema.partial({ pending: true, message: true }) },
  };
  ctx.docs.route(
    app,
    {
      method: 'POST',
      url: '/api/v1/deployments/:name/promote',
      tag,
      auth: 'write',
      summary: 'Promote a version: it takes every call, the other versions stop',
      query,
      body: { content: { 'application/json': PromoteSchema } },
      responses,
    },
    async (request, reply) => {
      const name = deploymentName(request);
      const { wait, waitMs } = queryFlags(request);
      const body = bodyBuffer(request.body);
      if (body.length === 0) {
        const versions = ctx.state.deployments.get(name)?.spec.versions?.map((v) => v.version);
        throw new TroupeError(
          'TROUPE_ERR_BAD_REQUEST',
          `promote '${name}': name the version that takes every call in the body, {"version": "${versions?.at(-1) ?? 'v2'}"}${versions ? ` (versions: ${versions.join(', ')})` : ''}`,
        );
      }
      const parsed = PromoteSchema.safeParse(parseDocument(body, request.headers['content-type']));
      if (!parsed.success) throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `invalid promote request: ${formatIssues(parsed.error.issues)}`);
      return answerDeployment(ctx, ctx.deployments.promote(name, parsed.data.version, waitMs), wait, reply);
    },
  );
  ctx.docs.route(
    app,
    {
      method: 'POST',
      url: '/api/v1/deployments/:name/rollback',
      tag,
      auth: 'write',
      summary:
        'Roll back a rollout: after a promotion, the split as it was before it; otherwise the first version listed takes every call and the others stop',
      query,
      responses,
    },
    async (request, reply) => {
      const name = deploymentName(request);
      const { wait, waitMs } = queryFlags(request);
      return answerDeployment(ctx, ctx.deployments.rollback(name, waitMs), wait, reply);
    },
  );
}
