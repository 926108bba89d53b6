import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { NameSchema, TroupeError, newId } from '../../runtime/internal.js';
import type { Logger } from '../../runtime/internal.js';
import { parseModelRef } from '../../runtime/model-ref.js';
import { TensorInfoSchema } from '../../runtime/protocol/common.js';
import { inspectOnnx } from '../../runtime/onnx-inspect.js';

/**
 * Uploaded models, stored content-addressed under the head's data directory:
 *
 *   <dataDir>/models/blobs/<sha256>.onnx   the bytes, named by their hash, never rewritten
 *   <dataDir>/models/index.json            name -> sha256 and the metadata read from the file
 *
 * Uploads stream to a temporary file while being hashed and counted, are checked by parsing them
 * as ONNX, and only then are renamed into place, so a blob that exists is complete and valid.
 *
 * A blob is kept while a model name or a deployment refers to it: deployments run a model by its
 * hash, so a re-uploaded name leaves the old bytes to the deployments still running them (agents
 * fetch them again to restart a replica). A blob nothing refers to any more is removed when a
 * model is deleted or a name is re-uploaded with other bytes.
 */

/** A deployment's `model`, as the store reads it to find the uploaded models it uses. */
export interface DeployedModel {
  deployment: string;
  model: string;
}

const BLOB_FILE = /^([0-9a-f]{64})\.onnx$/;

export const ModelRecordSchema = z.object({
  name: z.string(),
  sha256: z.string(),
  bytes: z.number(),
  uploadedAt: z.string(),
  irVersion: z.number(),
  opsets: z.array(z.object({ domain: z.string(), version: z.number() })),
  producer: z.string(),
  inputs: z.array(TensorInfoSchema),
  outputs: z.array(TensorInfoSchema),
});
export type ModelRecord = z.infer<typeof ModelRecordSchema>;

const IndexSchema = z.record(z.string(), ModelRecordSchema);

/**
 * Refuses a name that is not a plain file-safe name. `../x`, `a/b` and the like get
 * TROUPE_ERR_MODEL_PATH: they would name something outside the store.
 */
export function checkModelName(name: string): string {
  if (NameSchema.safeParse(name).success) return name;
  const escapes = name.includes('/') || name.includes('\\') || name.includes('..') || name.startsWith('.');
  const rule = 'names are 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit';
  if (escapes)
    throw new TroupeError(
      'TROUPE_ERR_MODEL_PATH',
      `model name '${name.slice(0, 100)}' is not allowed: it could escape the model store (${rule})`,
    );
  throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `model name '${name.slice(0, 100)}' is not allowed: ${rule}`);
}

export class ModelStore {
  readonly #root: string;
  readonly #log: Logger;
  readonly #index = new Map<string, ModelRecord>();
  readonly #deployed: () => Iterable<DeployedModel>;
  #saving: Promise<void> = Promise.resolve();
  /** Changes that pair a blob file with the index (commit an upload, delete, sweep) run one at a time. */
  #exclusive: Promise<unknown> = Promise.resolve();

  private constructor(root: string, log: Logger, deployed: () => Iterable<DeployedModel>) {
    this.#root = root;
    this.#log = log;
    this.#deployed = deployed;
  }

  /** `deployed` lists every deployment's model, read whenever the store must know what is in use. */
  static async open(dataDir: string, log: Logger, deployed: () => Iterable<DeployedModel> = () => []): Promise<ModelStore> {
    // Directories are made on the first upload: a head nobody uploads to writes nothing.
    const store = new ModelStore(join(dataDir, 'models'), log, deployed);
    const text = await readFile(join(store.#root, 'index.json'), 'utf8').catch(() => undefined);
    if (text !== undefined) {
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch {
        raw = undefined;
      }
      const parsed = IndexSchema.safeParse(raw);
      if (parsed.success) for (const [name, record] of Object.entries(parsed.data)) store.#index.set(name, record);
      else log.warn({ root: store.#root }, 'ignoring an unreadable models/index.json');
    }
    return store;
  }

  list(): ModelRecord[] {
    return [...this.#index.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  get(name: string): ModelRecord | undefined {
    return this.#index.get(name);
  }

  /** The blob file of a hash some uploaded model or deployment has, or undefined. */
  async blob(sha256: string): Promise<{ path: string; bytes: number } | undefined> {
    if (!this.#referenced().has(sha256)) return undefined;
    const path = join(this.#root, 'blobs', `${sha256}.onnx`);
    const info = await stat(path).catch(() => undefined);
    return info?.isFile() ? { path, bytes: info.size } : undefined;
  }

  /** Streams an upload to disk, checks it, and points `name` at it; `created` is false for a replaced name. */
  async put(name: string, source: Readable, limit: number): Promise<{ record: ModelRecord; created: boolean }> {
    await mkdir(join(this.#root, 'blobs'), { recursive: true, mode: 0o700 });
    await mkdir(join(this.#root, 'tmp'), { recursive: true, mode: 0o700 });
    const tmp = join(this.#root, 'tmp', `${newId()}.part`);
    const hash = createHash('sha256');
    let bytes = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        bytes += chunk.length;
        if (bytes > limit) {
          done(
            new TroupeError(
              'TROUPE_ERR_BODY_TOO_LARGE',
              `model '${name}' is larger than this head accepts (${Math.round(limit / 2 ** 20)} MiB; see --max-model-mib)`,
            ),
          );
          return;
        }
        hash.update(chunk);
        done(null, chunk);
      },
    });
    try {
      await pipeline(source, meter, createWriteStream(tmp, { mode: 0o600 }));
      if (bytes === 0)
        throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the body is empty: send the bytes of an .onnx file as model '${name}'`);
      const sha256 = hash.digest('hex');
      const summary = inspectOnnx(await readFile(tmp), `model '${name}'`);
      const blob = join(this.#root, 'blobs', `${sha256}.onnx`);
      // One at a time with sweeps: a sweep must not remove a blob this upload found and is about to name.
      const { record, created, replaced } = await this.#alone(async () => {
        if (await stat(blob).catch(() => undefined)) await rm(tmp, { force: true });
        else await rename(tmp, blob);
        const old = this.#index.get(name);
        const record: ModelRecord = { name, sha256, bytes, uploadedAt: new Date().toISOString(), ...summary };
        this.#index.set(name, record);
        await this.#saveIndex();
        return { record, created: old === undefined, replaced: old !== undefined && old.sha256 !== sha256 };
      });
      this.#log.info({ model: name, sha256, bytes }, 'model uploaded');
      if (replaced) await this.#sweep();
      return { record, created };
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Deployments that use model `name` (deployed from that name, whatever bytes it has now). */
  usersOf(name: string): string[] {
    return [...this.#deployed()]
      .filter((d) => parseModelRef(d.model)?.name === name)
      .map((d) => d.deployment)
      .sort();
  }

  /**
   * Forgets model `name` and removes the blobs nothing refers to any more. A model a deployment
   * uses is refused with TROUPE_ERR_MODEL_IN_USE, naming the deployments.
   */
  async delete(name: string): Promise<ModelRecord> {
    const record = this.#index.get(name);
    if (!record) throw new TroupeError('TROUPE_ERR_UNKNOWN_MODEL', `no uploaded model named '${name}'`);
    const users = this.usersOf(name);
    if (users.length > 0) {
      throw new TroupeError(
        'TROUPE_ERR_MODEL_IN_USE',
        `model '${name}' is used by deployment(s) ${users.map((u) => `'${u}'`).join(', ')}; delete or redeploy them first`,
      );
    }
    await this.#alone(async () => {
      this.#index.delete(name);
      await this.#saveIndex();
    });
    this.#log.info({ model: name, sha256: record.sha256 }, 'model deleted');
    await this.#sweep();
    return record;
  }

  /** Hashes something still refers to: a model name, or a deployment running an uploaded model. */
  #referenced(): Set<string> {
    const hashes = new Set([...this.#index.values()].map((r) => r.sha256));
    for (const d of this.#deployed()) {
      const ref = parseModelRef(d.model);
      if (ref) hashes.add(ref.sha256);
    }
    return hashes;
  }

  /** Removes every blob file nothing refers to. Only files named like blobs: nothing else is ours to remove. */
  #sweep(): Promise<void> {
    return this.#alone(async () => {
      const dir = join(this.#root, 'blobs');
      const files = await readdir(dir).catch(() => [] as string[]);
      const keep = this.#referenced();
      for (const file of files) {
        const sha256 = BLOB_FILE.exec(file)?.[1];
        if (!sha256 || keep.has(sha256)) continue;
        await rm(join(dir, file), { force: true });
        this.#log.info({ sha256 }, 'removed a blob no model or deployment uses');
      }
    });
  }

  #alone<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#exclusive.then(work, work);
    this.#exclusive = run.catch(() => undefined);
    return run;
  }

  /** Index writes are serialised and atomic (write, then rename), so a crash leaves the old or the new one. */
  #saveIndex(): Promise<void> {
    const write = async () => {
      const file = join(this.#root, 'index.json');
      const tmp = `${file}.${newId()}.tmp`;
      await writeFile(tmp, JSON.stringify(Object.fromEntries(this.#index), null, 2));
      await rename(tmp, file);
    };
    this.#saving = this.#saving.then(write, write);
    return this.#saving;
  }
}
