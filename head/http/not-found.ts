import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorResponse, responseStarted } from '../../runtime/internal.js';
import type { HttpError } from '../../runtime/internal.js';
import { sendError } from './errors.js';

/**
 * The answers fastify would otherwise give in its own shape (`{statusCode, error, message}`) or
 * as a bare 404: a known path asked with another method (405 with Allow, as RFC 9110 asks), an
 * unknown path, and the errors Node's HTTP parser meets before any route is chosen.
 */

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];

/** The methods some route serves `path` with (fastify's router, which also answers HEAD for a GET). */
export function allowedMethods(app: FastifyInstance, path: string): string[] {
  return METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
}

/** The not-found handler of the head's app: 405 with Allow where the path is known, else 404. */
export function notFound(app: FastifyInstance) {
  return (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const path = request.url.split('?')[0]!;
    const shown = path.slice(0, 200);
    const allowed = allowedMethods(app, path);
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      return sendError(reply.header('allow', allowed.join(', ')), {
        status: 405,
        code: 'TROUPE_ERR_METHOD_NOT_ALLOWED',
        message: `${request.method} is not allowed on ${shown}: it takes ${allowed.join(', ')}`,
      });
    }
    return sendError(reply, {
      status: 404,
      code: 'TROUPE_ERR_NOT_FOUND',
      message: `no endpoint ${request.method} ${shown} (see GET /docs)`,
    });
  };
}

/**
 * Node's HTTP server's `clientError`: a request it could not parse (a malformed line or header,
 * bytes past a body shorter than its Content-Length), a head too large, or one not received in
 * time. Answered in the API's shape when nothing else is being written on the socket, then the
 * connection is dropped, as Node's own handler does.
 */
export function clientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const error: HttpError =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? { status: 408, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the request was not received in time' }
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? { status: 431, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the request head (line and headers) is larger than this server reads' }
        : { status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: `malformed HTTP request: ${err.message.slice(0, 200)}` };
  const { headers, body } = errorResponse(error);
  if (socket.writable && !responseStarted(socket)) {
    let head = `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n`;
    for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
    socket.write(`${head}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}
