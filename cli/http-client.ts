import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { TroupeError, isErrorCode, readPem } from '../runtime/internal.js';
import type { FlagSpec } from './flags.js';

/**
 * What `troupe deploy` and `troupe status` share: they are thin clients of the head's HTTP API
 * (node:http, not fetch: fetch refuses ports browsers block, 6000 or 10080, that a head may
 * listen on), so they work against any head a person can reach with curl.
 */

export const DEFAULT_HEAD = process.env.TROUPE_HEAD ?? `http://127.0.0.1:${process.env.TROUPE_PORT ?? 8470}`;

export const HeadUrlSchema = z
  .string()
  .regex(/^(https?|wss?):\/\/[^\s/]+(\/\S*)?$/, 'must be an http:// (or ws://) URL such as http://127.0.0.1:8470')
  .refine((url) => URL.canParse(url), 'must be an http:// (or ws://) URL with a numeric port, such as http://127.0.0.1:8470');

/** The head's HTTP base URL; the ws:// form the SDK and agents use is accepted too. */
export function httpBase(head: string): string {
  return head.replace(/^ws/, 'http').replace(/\/+$/, '');
}

/**
 * Splits a command line into positional arguments and flags, using `spec` to know which flags
 * take a value (so `--head URL FILE` keeps URL with its flag). The flags then go to parseFlags.
 */
export function splitPositionals(command: string, argv: string[], spec: FlagSpec): { positionals: string[]; flags: string[] } {
  let tokens: ReturnType<typeof parseArgs>['tokens'];
  try {
    ({ tokens } = parseArgs({ args: argv, options: spec, strict: true, allowPositionals: true, tokens: true }));
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `${command}: ${(err as Error).message.split('\n')[0]} (see troupe ${command} --help)`);
  }
  const at = new Set((tokens ?? []).filter((t) => t.kind === 'positional').map((t) => t.index));
  return { positionals: argv.filter((_, i) => at.has(i)), flags: argv.filter((_, i) => !at.has(i)) };
}

export interface HeadClient {
  request(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
}

/** A client whose failures are TroupeErrors: the head's own code, or CONNECTION_CLOSED when unreachable. */
export function headClient(head: string, token: string | undefined): HeadClient {
  const base = httpBase(head);
  return {
    async request(method, path, body) {
      let response: { status: number; text: string };
      try {
        response = await send(
          `${base}${path}`,
          method,
          {
            ...(token ? { authorization: `Bearer ${token}` } : {}),
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          body !== undefined ? JSON.stringify(body) : undefined,
        );
      } catch (err) {
        throw new TroupeError(
          'TROUPE_ERR_CONNECTION_CLOSED',
          `cannot reach the head at ${base}: ${(err as Error).message} (is it running? see --head)`,
        );
      }
      const { text } = response;
      const ok = response.status >= 200 && response.status < 300;
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // Not JSON: keep the text for the error message.
      }
      if (ok) return { status: response.status, body: parsed };
      const error = parsed as { error?: unknown; code?: unknown } | undefined;
      const message =
        typeof error?.error === 'string' ? error.error : `HTTP ${response.status} from ${method} ${path}: ${text.slice(0, 200)}`;
      throw new TroupeError(isErrorCode(error?.code) ? error.code : 'TROUPE_ERR_INTERNAL', message);
    },
  };
}

/** One request, its answer read whole. */
function send(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    // A head with TLS of its own is verified with the CA TROUPE_TLS_CA names, as the SDK does.
    const caFile = secure ? process.env.TROUPE_TLS_CA : undefined;
    const ca = caFile ? readPem('TROUPE_TLS_CA', caFile) : undefined;
    const req = (secure ? httpsRequest : httpRequest)(target, { method, headers, ...(ca ? { ca } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
