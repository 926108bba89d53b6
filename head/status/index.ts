import type { FastifyInstance } from 'fastify';
import type { ClusterState } from '../state/cluster-state.js';
import { sendError } from '../http/errors.js';
import { StatusAssets } from './assets.js';
import type { StatusSession } from './client/protocol.js';
import { EventFeed } from './event-feed.js';
import { ClusterSampler } from './sampler.js';
import { StatusSessions } from './session.js';
import { buildSnapshot } from './snapshot.js';
import type { GraphSource } from './snapshot.js';
import { StatusStream } from './stream.js';

export interface StatusPageOptions {
  state: ClusterState;
  graphs: GraphSource;
  /** The address the head listens on: beyond loopback, a configured token is required. */
  host: string;
  token: string | undefined;
  /** Whether the head is shutting down: the page's readiness then says so, as /readyz does. */
  draining?: () => boolean;
  /** Sampling period of the time series (default 1000 ms). */
  sampleMs?: number;
  /** Samples kept per series (default 600: ten minutes at one a second). */
  historySamples?: number;
}

/**
 * The status page on the head's fastify app: the page at `GET /`, its assets under
 * `/status/assets/`, the login endpoints under `/status/`, and the live feed at
 * `GET /api/v1/stream` (server-sent events). It samples the cluster into in-memory time series
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
    () => buildSnapshot(state, graphs, sampler, feed, options.draining?.() ?? false),
    sampler,
    feed,
  );
  const sessions = new StatusSessions(options.token, options.host);
  const assets = new StatusAssets();

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

  app.get('/', async (_request, reply) => {
    const page = await assets.page();
    return reply
      .header('content-security-policy', page.csp)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .type('text/html; charset=utf-8')
      .send(page.html);
  });

  app.get<{ Params: { '*': string } }>('/status/assets/*', async (request, reply) => {
    const asset = await assets.get(request.params['*']);
    if (!asset)
      return sendError(reply, {
        status: 404,
        code: 'TROUPE_ERR_NOT_FOUND',
        message: `no status page asset '${request.params['*'].slice(0, 200)}'`,
      });
    return reply.header('x-content-type-options', 'nosniff').header('cache-control', 'no-cache').type(asset.type).send(asset.body);
  });

  app.get('/status/session', async (request, reply) => {
    const session: StatusSession = { required: sessions.required, authorized: sessions.authorized(request.headers) };
    return reply.header('cache-control', 'no-store').send(session);
  });

  app.post<{ Body: unknown }>('/status/login', async (request, reply) => {
    if (!sessions.required) return reply.code(204).send();
    const cookie = sessions.login((request.body as { token?: unknown } | null)?.token);
    if (!cookie) return sendError(reply, { status: 401, code: 'TROUPE_ERR_UNAUTHORIZED', message: 'wrong cluster token' });
    return reply.header('set-cookie', cookie).header('cache-control', 'no-store').code(204).send();
  });

  app.post('/status/logout', async (request, reply) => reply.header('set-cookie', sessions.logout(request.headers)).code(204).send());

  app.get('/api/v1/stream', async (request, reply) => {
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
  });
}
