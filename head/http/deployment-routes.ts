import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  DeploymentViewSchema,
  GraphViewSchema,
  ModelDeploymentSchema,
  NameSchema,
  TroupeError,
  looksLikeGraphDocument,
} from '../../runtime/internal.js';
import type { DeploymentView } from '../../runtime/internal.js';
import { DEFAULT_DEPLOY_TIMEOUT_S, MAX_DEPLOY_TIMEOUT_S, PendingActorSchema, pendingActors } from '../../runtime/deploy-timeout.js';
import { formatModelRef, parseModelRef } from '../../runtime/model-ref.js';
import { DeployTimeoutError } from '../control/deploy-bound.js';
import type { DeployStarted } from '../control/deployments.js';
import type { DeploymentRecord } from '../state/records.js';
import { bodyBuffer, parseDocument } from './body.js';
import type { ApiContext } from './context.js';

/**
 * Declarative deployments: `PUT /api/v1/deployments/{name}` says what should run (the same spec the
 * SDK's `deploy` takes), and saying it again changes nothing. `model` is an uploaded model's name
 * (deployed by its sha256, so a later upload under the same name does not touch it until the next
 * PUT) or a path under the agents' `--model-dir`.
 */

export const DeploymentDetailSchema = DeploymentViewSchema.extend({
  spec: z.record(z.string(), z.unknown()),
  /** Present when this PUT replaced a READY deployment with a different spec: what changed. */
  replaced: z.string().optional(),
});

/** A 202 past the bound: also every actor not READY with its reason, and one message naming them. */
export const DeploymentWaitingSchema = DeploymentDetailSchema.extend({ pending: z.array(PendingActorSchema), message: z.string() });

/** A query value in seconds: a number in (0, MAX_DEPLOY_TIMEOUT_S]; '' and '1e400' are not. */
const TimeoutSSchema = z
  .string()
  .regex(/^\d+(\.\d+)?$/)
  .transform(Number)
  .pipe(z.number().positive().max(MAX_DEPLOY_TIMEOUT_S));

function detail(ctx: ApiContext, d: DeploymentRecord): DeploymentView & { spec: Record<string, unknown> } {
  return { ...ctx.state.deploymentView(d), spec: { ...d.spec } };
}

export function deploymentName(request: FastifyRequest): string {
  const { name } = request.params as { name: string };
  if (!NameSchema.safeParse(name).success) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_SPEC',
      `deployment name '${name.slice(0, 100)}' is not allowed: names are 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
  }
  return name;
}

export function queryFlags(request: FastifyRequest): { wait: boolean; waitMs: number } {
  const query = request.query as Record<string, string | string[] | undefined>;
  const one = (name: string): string | undefined => {
    const value = query[name];
    if (Array.isArray(value)) throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `?${name} is given ${value.length} times`);
    return value;
  };
  const wait = one('wait') ?? 'true';
  if (!['true', 'false', '1', '0', ''].includes(wait))
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `?wait must be true or false, got '${wait.slice(0, 40)}'`);
  // ?timeout is the older name of ?timeoutS, still accepted; both at once would be ambiguous.
  const [timeoutS, alias] = [one('timeoutS'), one('timeout')];
  if (timeoutS !== undefined && alias !== undefined)
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', 'give ?timeoutS or its older name ?timeout, not both');
  const name = alias !== undefined ? 'timeout' : 'timeoutS';
  const given = timeoutS ?? alias;
  const parsed = given === undefined ? { success: true as const, data: DEFAULT_DEPLOY_TIMEOUT_S } : TimeoutSSchema.safeParse(given);
  if (!parsed.success) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `?${name} must be seconds in (0, ${MAX_DEPLOY_TIMEOUT_S}], got '${String(given).slice(0, 40)}'`,
    );
  }
  return { wait: wait === 'true' || wait === '1' || wait === '', waitMs: parsed.data * 1000 };
}

/** An uploaded model's name becomes a reference to its bytes; anything else stays a path. */
function resolveModel(ctx: ApiContext, model: unknown): unknown {
  if (typeof model !== 'string') return model;
  const uploaded = ctx.store.get(model);
  if (uploaded) return formatModelRef({ name: uploaded.name, sha256: uploaded.sha256 });
  const ref = parseModelRef(model);
  if (ref && !ctx.store.list().some((r) => r.sha256 === ref.sha256)) {
    throw new TroupeError('TROUPE_ERR_UNKNOWN_MODEL', `no uploaded model has sha256 ${ref.sha256}`);
  }
  return model;
}

/**
 * The answer to a model deploy: 201 or 200 once READY, 202 at once without waiting, or 202 past the
 * bound with every actor not READY and why (the deployment stays and keeps being placed).
 */
export async function answerDeployment(ctx: ApiContext, started: DeployStarted, wait: boolean, reply: FastifyReply): Promise<FastifyReply> {
  const { name } = started;
  const replaced = started.replaced ? { replaced: started.replaced } : {};
  const current = () => {
    const d = ctx.state.deployments.get(name);
    if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `deployment '${name}' was removed while deploying`);
    return { ...detail(ctx, d), ...replaced };
  };
  if (!wait) {
    started.ready.catch((err: unknown) =>
      ctx.log.info({ deployment: name, err: (err as Error).message }, 'deployment did not become READY'),
    );
    // Answered once the change is in the state file: a head killed next keeps it.
    await started.saved;
    return reply.code(202).send(current());
  }
  try {
    await started.ready;
  } catch (err) {
    if (!(err instanceof DeployTimeoutError)) throw err;
    // Past the bound is not a failure of the request: the deployment was accepted and stays.
    const view = current();
    return reply.code(202).send({ ...view, pending: pendingActors(view), message: err.message });
  }
  return reply.code(started.created ? 201 : 200).send(current());
}

export function registerDeploymentRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const { docs, state, log } = ctx;
  const tag = 'Deployments';

  docs.route(
    app,
    {
      method: 'PUT',
      url: '/api/v1/deployments/:name',
      tag,
      auth: 'write',
      summary: 'Create or update a deployment (idempotent); answers once every replica is READY, or after ?timeoutS with what is missing',
      description:
        'The body is JSON or YAML; the smallest is {"model": "<uploaded model name or path under the agents\' --model-dir>"}. ' +
        'A "name" in the body must match the path. 201 when created, 200 when it existed, 202 at once with ?wait=false. ' +
        `The wait is bounded: when ?timeoutS (seconds, default ${DEFAULT_DEPLOY_TIMEOUT_S}, at most ${MAX_DEPLOY_TIMEOUT_S}) passes first, the answer is 202 with each actor's state and reason, ` +
        '"pending" (every actor not READY: PENDING ones say what the scheduler could not find) and a "message" naming them. ' +
        'The deployment stays and the head keeps placing it; PUT again or GET it to follow. A graph body answers 202 likewise, with "deployments". ' +
        'A PUT that changes the spec of a READY deployment replaces it and says so in "replaced" (what changed). ' +
        'A 4xx changes nothing: a deploy refused for its spec, path, model file or fn reference (even once an actor tried to load it) leaves no deployment it created, ' +
        'and puts back the spec an update replaced; the message says which.',
      query: {
        wait: 'false: answer at once with 202 (default true)',
        timeoutS: `seconds to wait for READY before answering 202 with the reasons (default ${DEFAULT_DEPLOY_TIMEOUT_S}, at most ${MAX_DEPLOY_TIMEOUT_S})`,
        timeout: 'the older name of timeoutS',
      },
      body: {
        content: { 'application/json': ModelDeploymentSchema, 'application/yaml': ModelDeploymentSchema },
        description: 'a model\'s spec, or a graph\'s JSON form ({"graph": name, "nodes": [...]})',
      },
      responses: {
        200: { description: 'READY (it existed)', schema: DeploymentDetailSchema },
        201: { description: 'READY (new)', schema: DeploymentDetailSchema },
        202: {
          description: 'accepted, still deploying (with ?wait=false: the deployment; past ?timeoutS: also pending and message)',
          schema: DeploymentWaitingSchema.partial({ pending: true, message: true }),
        },
      },
    },
    async (request, reply) => {
      const name = deploymentName(request);
      const { wait, waitMs } = queryFlags(request);
      const doc = parseDocument(bodyBuffer(request.body), request.headers['content-type']);
      if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
        throw new TroupeError('TROUPE_ERR_BAD_SPEC', 'the body must be an object such as {"model": "mlp.onnx"}');
      const body = doc as Record<string, unknown>;
      // A graph's JSON form (the one the SDK's builders produce) deploys the graph and its models.
      const graph = looksLikeGraphDocument(body);
      if (graph && body.graph !== name)
        throw new TroupeError(
          'TROUPE_ERR_BAD_SPEC',
          `the body is graph '${String(body.graph).slice(0, 100)}' but the path names '${name}'`,
        );
      if (!graph && body.name !== undefined && body.name !== name) {
        throw new TroupeError(
          'TROUPE_ERR_BAD_SPEC',
          `the body names deployment '${String(body.name).slice(0, 100)}' but the path names '${name}'`,
        );
      }
      // PUT says what should run: saying it again changes nothing, saying something else replaces it.
      const started = ctx.deployments.deploy({
        spec: graph ? body : { ...body, name },
        timeoutMs: waitMs,
        replace: true,
        resolveModel: (model) => resolveModel(ctx, model),
      });
      const replaced = started.replaced ? { replaced: started.replaced } : {};
      if (started.kind === 'graph') {
        if (!wait) {
          started.ready.catch((err: unknown) => log.info({ graph: name, err: (err as Error).message }, 'graph did not deploy'));
          await started.saved;
          return reply.code(202).send({ graph: name, state: 'DEPLOYING', ...replaced });
        }
        try {
          return reply.code(started.created ? 201 : 200).send({ ...(await started.ready), ...replaced });
        } catch (err) {
          if (!(err instanceof DeployTimeoutError)) throw err;
          const pending = err.views.flatMap(pendingActors);
          return reply
            .code(202)
            .send({ graph: name, state: 'DEPLOYING', deployments: err.views, pending, message: err.message, ...replaced });
        }
      }
      return answerDeployment(ctx, started, wait, reply);
    },
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/deployments',
      tag,
      auth: 'read',
      summary: 'Every deployment, down to each actor',
      responses: { 200: { description: 'deployments', schema: z.object({ deployments: z.array(DeploymentDetailSchema) }) } },
    },
    async () => ({ deployments: [...state.deployments.values()].map((d) => detail(ctx, d)) }),
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/deployments/:name',
      tag,
      auth: 'read',
      summary:
        'One deployment: state, spec and each actor (state, reason, node, device, pid, restarts); or one graph: its kind, steps, inferred inputs and outputs, and the deployments it calls',
      responses: { 200: { description: 'the deployment, or the graph', schema: z.union([DeploymentDetailSchema, GraphViewSchema]) } },
    },
    async (request) => {
      const name = deploymentName(request);
      // A graph is read where it is written and deleted (PUT and DELETE on this path).
      const graph = ctx.graphs.views().find((g) => g.name === name);
      if (graph) return graph;
      const d = state.deployments.get(name);
      if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment or graph named '${name}'`);
      return detail(ctx, d);
    },
  );

  docs.route(
    app,
    {
      method: 'DELETE',
      url: '/api/v1/deployments/:name',
      tag,
      auth: 'write',
      summary: 'Remove a graph (its models stay), or drain and remove a deployment (answers once its actors have finished their calls)',
      description:
        'A deployment that a deployed graph calls is refused with 409 TROUPE_ERR_DEPLOYMENT_IN_USE naming the graphs; ' +
        '?force=true deletes it anyway (the graphs then fail until it is deployed again).',
      query: { force: 'true: delete a deployment even while graphs call it (default false)' },
      responses: {
        200: {
          description: 'removed',
          schema: z.object({ name: z.string(), kind: z.enum(['graph', 'deployment']), deleted: z.literal(true) }),
        },
      },
    },
    async (request) => {
      const name = deploymentName(request);
      const removed = await ctx.deployments.undeploy(name, { force: forceFlag(request) });
      return { ...removed, deleted: true as const };
    },
  );
}

/** ?force: true, 1 or empty force; false, 0 or absent do not. */
function forceFlag(request: FastifyRequest): boolean {
  const value = (request.query as Record<string, string | string[] | undefined>).force;
  if (Array.isArray(value)) throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `?force is given ${value.length} times`);
  if (value === undefined) return false;
  if (!['true', 'false', '1', '0', ''].includes(value))
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `?force must be true or false, got '${value.slice(0, 40)}'`);
  return value === 'true' || value === '1' || value === '';
}
