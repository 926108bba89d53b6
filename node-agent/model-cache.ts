import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { TroupeError, newId, resolveModelPath } from '../runtime/internal.js';
import type { TlsClientOptions } from '../runtime/internal.js';
import { blobUrl, parseModelRef } from '../runtime/model-ref.js';
import type { ModelRef } from '../runtime/model-ref.js';

/**
 * Where an actor's model file comes from. A deployment's `model` is either a path under the
 * agent's `--model-dir` (model-path.ts) or a reference to a model uploaded to the head
 * (`head:<name>@sha256:<hex>`, runtime/model-ref.ts). Uploaded models are fetched from the head
 * once, checked against their hash, and kept in a cache named by hash, so replicas and restarts
 * on this machine reuse the file, and a cached file is always the bytes the hash names.
 */

export interface ModelSource {
  modelDir: string;
  /** The head's address (ws:// or http://); blobs come from its HTTP API on the same port. */
  headUrl: string;
  token?: string;
  /** For a head reached over TLS: the CA it is verified with, and a client certificate it may ask for (the agent's own). */
  tls?: TlsClientOptions;
}

/** Fetches slower than this are abandoned (the head's start request gives up sooner anyway). */
const FETCH_TIMEOUT_MS = 120_000;

/** One fetch per hash at a time: replicas starting together share it. */
const inFlight = new Map<string, Promise<string>>();

/**
 * The cache: `TROUPE_MODEL_CACHE`, else `.troupe-cache` inside the model directory (the agent
 * already owns that directory, and one place to clean is simpler than two).
 */
export function cacheDir(modelDir: string): string {
  return resolve(process.env.TROUPE_MODEL_CACHE ?? join(modelDir, '.troupe-cache'));
}

/** The local file to load for a deployment's `model`. */
export async function resolveModel(source: ModelSource, model: string): Promise<string> {
  const ref = parseModelRef(model);
  if (!ref) return resolveModelPath(source.modelDir, model);
  const file = join(cacheDir(source.modelDir), `${ref.sha256}.onnx`);
  if ((await stat(file).catch(() => undefined))?.isFile()) return file;
  let fetching = inFlight.get(ref.sha256);
  if (!fetching) {
    fetching = fetchModel(source, ref, file).finally(() => inFlight.delete(ref.sha256));
    inFlight.set(ref.sha256, fetching);
  }
  return fetching;
}

/**
 * GETs `url` with node:http(s), not fetch: fetch takes no CA or client certificate, which a head
 * with TLS of its own needs. Resolves with the response once its head arrived.
 */
function get(url: URL, source: ModelSource): Promise<IncomingMessage> {
  const { ca, cert, key } = source.tls ?? {};
  const secure = url.protocol === 'https:';
  return new Promise((resolve, reject) => {
    const req = (secure ? httpsRequest : httpRequest)(url, {
      headers: source.token ? { authorization: `Bearer ${source.token}` } : {},
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      ...(secure && ca !== undefined ? { ca } : {}),
      ...(secure && cert !== undefined && key !== undefined ? { cert, key } : {}),
    });
    req.once('response', resolve);
    req.once('error', reject);
    req.end();
  });
}

/** The first bytes of an error answer, as text. */
async function textOf(response: IncomingMessage, limit: number): Promise<string> {
  let text = '';
  for await (const chunk of response) {
    text += (chunk as Buffer).toString('utf8');
    if (text.length >= limit) break;
  }
  response.destroy();
  return text.slice(0, limit);
}

async function fetchModel(source: ModelSource, ref: ModelRef, file: string): Promise<string> {
  const url = blobUrl(source.headUrl, ref.sha256);
  const what = `uploaded model '${ref.name}' (sha256 ${ref.sha256.slice(0, 12)}…)`;
  let response: IncomingMessage;
  try {
    response = await get(url, source);
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_MODEL_FETCH', `cannot fetch ${what} from ${url.origin}: ${(err as Error).message}`);
  }
  if (response.statusCode !== 200) {
    const detail = await textOf(response, 300).catch(() => '');
    throw new TroupeError('TROUPE_ERR_MODEL_FETCH', `the head answered HTTP ${response.statusCode} for ${what}: ${detail}`);
  }
  await mkdir(cacheDir(source.modelDir), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${newId()}.part`;
  const hash = createHash('sha256');
  const tee = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(response, tee, createWriteStream(tmp, { mode: 0o600 }));
    const got = hash.digest('hex');
    if (got !== ref.sha256)
      throw new TroupeError('TROUPE_ERR_MODEL_FETCH', `${what} arrived with sha256 ${got}: the bytes are not the model that was deployed`);
    // Rename is atomic: a cached file is either absent or complete and verified.
    await rename(tmp, file);
    return file;
  } catch (err) {
    if (err instanceof TroupeError) throw err;
    throw new TroupeError('TROUPE_ERR_MODEL_FETCH', `fetching ${what} failed: ${(err as Error).message}`);
  } finally {
    await rm(tmp, { force: true });
  }
}
