import type { FastifyInstance } from 'fastify';
import type { ClusterState } from '../state/cluster-state.js';
import { z } from 'zod';
import { sendError } from '../http/errors.js';
import { ApiDocs } from '../http/openapi.js';
import { StatusAssets } from './assets.js';
import type { StatusSession } from './client/protocol.js';
import { EventFeed } from './event-feed.js';
import { ClusterSampler } from './sampler.js';
import { StatusSessions } from './session.js';
import { StatusFrame } from './frame.js';
import type { GraphSource } from './frame.js';
import { StatusStream } from './stream.js';
import { MAX_WINDOW_ROWS, ViewRequestSchema } from './windows.js';

export interface StatusPageOptions {
  state: ClusterState;
  graphs: GraphSource;
  /** The address the head listens on: beyond loopback, a configured token is required. */
  host: string;
  token: string | undefined;
  /** The head serves HTTPS: the session cookie is marked Secure. */
  secure?: boolean;
  /** Whether the head is shutting down: the page's readiness then says so, as /readyz does. */
  draining?: () => boolean;
  /** Sampling period of the time series (default 1000 ms). */
  sampleMs?: number;
  /** Samples kept per series (default 600: ten minutes at one a second). */
  historySamples?: number;
  /** The head's OpenAPI document, where these routes are described. */
  docs?: ApiDocs;
}

const StatusSessionSchema = z.object({ required: z.boolean(), authorized: z.boolean() });
const LoginSchema = z.object({ token: z.string().max(4096) });

/**
 * The status page on the head's fastify app: the page at `GET /`, its assets under
 * `/status/assets/`, the login endpoints under `/status/`, the live feed at
 * `GET /api/v1/stream` (server-sent events), and `POST /api/v1/stream/view`, where a page says
 * which nodes and actors it looks at. It samples the cluster into in-memory time series
 * from the moment it is registered, whether or not anyone is looking, so a page opened later
 * still shows the last minutes. Streams and timers end with the app.
 *
 * @example
 * registerStatusPage(app, { state, graphs, host, token });
 */
export function registerStatusPage(app: FastifyInstance, options: StatusPageOptions): void {
  const { state, graphs } = options;
  const sampler = new ClusterSampler(state, options.historySamples ?? 600);
  const feed = new EventFeed(state, () => stream.pushSoon());
  const stream: StatusStream = new StatusStream(
    () => new StatusFrame(state, graphs, sampler, feed, options.draining?.() ?? false),
    sampler,
    feed,
  );
  const sessions = new StatusSessions(options.token, options.host, options.secure ?? false);
  const assets = new StatusAssets();
  const docs = options.docs ?? new ApiDocs();
  const tag = 'Status page';

  const timer = setInterval(() => {
    sampler.record();
    stream.push();
  }, options.sampleMs ?? 1000);
  timer.unref();
  // Before the server closes: an open event stream would otherwise keep app.close() waiting.
  app.addHook('preClose', async () => stream.close());
  app.addHook('onClose', async () => {
    clearInterval(timer);
    feed.close();
  });

  docs.route(
    app,
    {
      method: 'GET',
      url: '/',
      tag,
      auth: 'read',
      summary: 'The status page (HTML)',
      responses: { 200: { description: 'the page', content: { 'text/html': 'text' } } },
    },
    async (_request, reply) => {
      const page = await assets.page();
      return reply
        .header('content-security-policy', page.csp)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .type('text/html; charset=utf-8')
        .send(page.html);
    },
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/status/assets/*',
      tag,
      auth: 'read',
      summary: "The status page's files: its modules, stylesheet, icon and the charting libraries it loads",
      responses: {
        200: {
          description: 'the file',
          content: { 'text/javascript': 'text', 'text/css': 'text', 'image/svg+xml': 'text', 'application/json': 'text' },
        },
      },
    },
    async (request, reply) => {
      const path = (request.params as { '*': string })['*'];
      const asset = await assets.get(path);
      if (!asset)
        return sendError(reply, { status: 404, code: 'TROUPE_ERR_NOT_FOUND', message: `no status page asset '${path.slice(0, 200)}'` });
      return reply.header('x-content-type-options', 'nosniff').header('cache-control', 'no-cache').type(asset.type).send(asset.body);
    },
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/status/session',
      tag,
      auth: 'read',
      summary: "Whether the page needs the cluster token, and whether this browser's session has it",
      responses: { 200: { description: 'the session', schema: StatusSessionSchema } },
    },
    async (request, reply) => {
      const session: StatusSession = { required: sessions.required, authorized: sessions.authorized(request.headers) };
      return reply.header('cache-control', 'no-store').send(session);
    },
  );

  docs.route(
    app,
    {
      method: 'POST',
      url: '/status/login',
      tag,
      auth: 'read',
      summary: 'Log the page in with the cluster token: a session cookie (HttpOnly, SameSite=Strict) for the live feed',
      body: { content: { 'application/json': LoginSchema } },
      responses: {
        204: { description: 'logged in (or no token is needed)', headers: { 'set-cookie': 'the session cookie, when a token is needed' } },
      },
    },
    async (request, reply) => {
      if (!sessions.required) return reply.code(204).send();
      const parsed = LoginSchema.safeParse(request.body);
      if (!parsed.success)
        return sendError(reply, { status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the login body is {"token": "<cluster token>"}' });
      const cookie = sessions.login(parsed.data.token);
      if (!cookie) return sendError(reply, { status: 401, code: 'TROUPE_ERR_UNAUTHORIZED', message: 'wrong cluster token' });
      return reply.header('set-cookie', cookie).header('cache-control', 'no-store').code(204).send();
    },
  );

  docs.route(
    app,
    {
      method: 'POST',
      url: '/status/logout',
      tag,
      auth: 'read',
      summary: "End the page's session",
      responses: { 204: { description: 'logged out', headers: { 'set-cookie': 'clears the session cookie' } } },
    },
    async (request, reply) => reply.header('set-cookie', sessions.logout(request.headers)).code(204).send(),
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/stream',
      tag,
      auth: 'write',
      summary:
        "The status page's live feed (server-sent events): the cluster's summary, deployments, a page of nodes and of actors, then what changed about once a second",
      description:
        "Needs the cluster token when the head has one: the page's session cookie (POST /status/login) or Authorization: Bearer. " +
        'At most a few viewers at once (429 past them). The first event names the viewer id that POST /api/v1/stream/view takes.',
      responses: { 200: { description: 'the event stream', content: { 'text/event-stream': 'text' } } },
    },
    async (request, reply) => {
      if (!sessions.authorized(request.headers)) {
        return sendError(reply, {
          status: 401,
          code: 'TROUPE_ERR_UNAUTHORIZED',
          message: "the status stream needs the cluster token: log in on the page, or send 'Authorization: Bearer <token>'",
        });
      }
      if (stream.atCapacity)
        return sendError(reply, {
          status: 429,
          code: 'TROUPE_ERR_OVERLOADED',
          message: `the status stream already has ${stream.viewers} viewers`,
        });
      reply.hijack();
      stream.open(reply.raw);
    },
  );

  docs.route(
    app,
    {
      method: 'POST',
      url: '/api/v1/stream/view',
      tag,
      auth: 'write',
      summary:
        'Say which nodes and actors an open status stream shows: a page of each, sorted and filtered; the stream sends those windows within 25 ms',
      description:
        `Windows hold at most ${MAX_WINDOW_ROWS} rows. Needs what the stream needs (session cookie or Authorization: Bearer). ` +
        '400 TROUPE_ERR_BAD_REQUEST names a malformed field; 404 TROUPE_ERR_NOT_FOUND: no open stream has this viewer id.',
      body: { content: { 'application/json': ViewRequestSchema } },
      responses: { 204: { description: 'the stream now sends this view' } },
    },
    async (request, reply) => {
      if (!sessions.authorized(request.headers))
        return sendError(reply, {
          status: 401,
          code: 'TROUPE_ERR_UNAUTHORIZED',
          message: "the status stream's view needs the cluster token: log in on the page, or send 'Authorization: Bearer <token>'",
        });
      const parsed = ViewRequestSchema.safeParse(request.body);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        return sendError(reply, {
          status: 400,
          code: 'TROUPE_ERR_BAD_REQUEST',
          message: `bad status view: ${issue.path.join('.') || 'body'}: ${issue.message}`,
        });
      }
      const { viewer, seq, nodes, actors } = parsed.data;
      if (!stream.view(viewer, seq, nodes, actors))
        return sendError(reply, { status: 404, code: 'TROUPE_ERR_NOT_FOUND', message: 'no open status stream has this viewer id' });
      return reply.code(204).send();
    },
  );
}
