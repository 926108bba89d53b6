import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { registerStatusPage } from '../../head/status/index.js';
import { ClusterState } from '../../head/state/cluster-state.js';

const TOKEN = 'status-test-token-41c9';

function app(host: string, token: string | undefined): FastifyInstance {
  const fastify = Fastify({ logger: false });
  registerStatusPage(fastify, { state: new ClusterState(), graphs: { views: () => [], plan: () => undefined }, host, token });
  return fastify;
}

describe('status page routes: assets, and who may read the stream', () => {
  const open = app('127.0.0.1', TOKEN);
  const guarded = app('0.0.0.0', TOKEN);
  after(async () => {
    await open.close();
    await guarded.close();
  });

  test('the page and every asset it loads come from the head, with a CSP that allows nothing else', async () => {
    const page = await open.inject({ method: 'GET', url: '/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    assert.doesNotMatch(csp, /unsafe-eval/);
    assert.doesNotMatch(page.body, /https?:\/\//, 'no CDN, no outside URL');
    const assets = [...page.body.matchAll(/(?:src|href)="(\/status\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    const imports = JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(page.body)![1]!) as { imports: Record<string, string> };
    for (const url of [...assets, ...Object.values(imports.imports)]) {
      const res = await open.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.ok(res.body.length > 100, `${url} has content`);
    }
    assert.deepEqual(Object.keys(imports.imports).sort(), ['@dagrejs/dagre', 'uplot']);
  });

  test('asset names cannot leave the asset folders', async () => {
    for (const url of [
      '/status/assets/app/../index.js',
      '/status/assets/app/..%2fsession.js',
      '/status/assets/../../package.json',
      '/status/assets/app/missing.js',
      '/status/assets/vendor/other.js',
    ]) {
      const res = await open.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.doesNotMatch(res.body, /"name"|import |export /, `${url} gave no file`);
    }
  });

  test('on loopback the stream needs no login, even with a token configured', async () => {
    assert.deepEqual((await open.inject({ method: 'GET', url: '/status/session' })).json(), { required: false, authorized: true });
  });

  test('beyond loopback with a token: 401 without it; a login gives an HttpOnly session cookie that is not the token', async () => {
    assert.deepEqual((await guarded.inject({ method: 'GET', url: '/status/session' })).json(), { required: true, authorized: false });
    const refused = await guarded.inject({ method: 'GET', url: '/api/v1/stream' });
    assert.equal(refused.statusCode, 401);
    assert.equal(refused.json().code, 'TROUPE_ERR_UNAUTHORIZED');
    const view = await guarded.inject({ method: 'POST', url: '/api/v1/stream/view', payload: { viewer: 'x' } });
    assert.equal(view.statusCode, 401, 'choosing what a stream shows needs what the stream needs');
    assert.equal(view.json().code, 'TROUPE_ERR_UNAUTHORIZED');

    const wrong = await guarded.inject({ method: 'POST', url: '/status/login', payload: { token: 'nope' } });
    assert.equal(wrong.statusCode, 401);
    assert.equal(wrong.headers['set-cookie'], undefined);

    const login = await guarded.inject({ method: 'POST', url: '/status/login', payload: { token: TOKEN } });
    assert.equal(login.statusCode, 204);
    const cookie = String(login.headers['set-cookie']);
    assert.match(cookie, /^troupe_status=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/);
    assert.ok(!cookie.includes(TOKEN), 'the cookie does not carry the token');
    const session = cookie.split(';')[0]!;
    assert.deepEqual((await guarded.inject({ method: 'GET', url: '/status/session', headers: { cookie: session } })).json(), {
      required: true,
      authorized: true,
    });
    assert.deepEqual(
      (await guarded.inject({ method: 'GET', url: '/status/session', headers: { cookie: 'troupe_status=forged' } })).json(),
      { required: true, authorized: false },
    );
    assert.deepEqual(
      (await guarded.inject({ method: 'GET', url: '/status/session', headers: { authorization: `Bearer ${TOKEN}` } })).json(),
      { required: true, authorized: true },
    );
    assert.deepEqual(
      (await guarded.inject({ method: 'GET', url: '/status/session', headers: { authorization: 'Bearer nope', cookie: session } })).json(),
      { required: true, authorized: false },
      'a wrong token is refused even with a good cookie',
    );

    const out = await guarded.inject({ method: 'POST', url: '/status/logout', headers: { cookie: session } });
    assert.match(String(out.headers['set-cookie']), /Max-Age=0/);
    assert.deepEqual((await guarded.inject({ method: 'GET', url: '/status/session', headers: { cookie: session } })).json(), {
      required: true,
      authorized: false,
    });
  });

  test('the page never contains the token', async () => {
    for (const url of ['/', '/status/session']) assert.ok(!(await guarded.inject({ method: 'GET', url })).body.includes(TOKEN), url);
  });
});
