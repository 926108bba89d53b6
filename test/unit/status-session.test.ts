import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusSessions } from '../../head/status/session.js';

const TOKEN = 'status-session-token-0123456789';

test("the status page's session cookie is Secure when the head serves HTTPS, and not otherwise", () => {
  const https = new StatusSessions(TOKEN, '0.0.0.0', true);
  const cookie = https.login(TOKEN);
  assert.match(cookie ?? '', /; HttpOnly; SameSite=Strict; Max-Age=\d+; Secure$/);
  assert.match(https.logout({}), /Max-Age=0; Secure$/);
  const http = new StatusSessions(TOKEN, '0.0.0.0');
  assert.doesNotMatch(http.login(TOKEN) ?? '', /Secure/);
});
