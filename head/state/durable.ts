import { copyFile, link, mkdir, open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ModelDeploymentSchema, NameSchema, newId } from '../../runtime/internal.js';
import type { Logger, ModelDeployment } from '../../runtime/internal.js';
import { previousOf, readStateFile, unreadableState } from './state-file.js';

/**
 * The head's durable state, so a restarted head costs seconds, not deployments:
 *
 *   <dataDir>/state.json   deployments (specs), graph documents, and the identity of every actor
 *                          that was started (id, name, node, GPUs, pid and its secret)
 *   <dataDir>/state.json.prev   the same as it was before the last write
 *
 * Uploaded models already live under `<dataDir>/models` (http/model-store.ts). The cluster token
 * is never written here: it comes from `--token` or TROUPE_TOKEN at every start.
 *
 * Actor secrets are what let a running actor rejoin a restarted head (it presents id + secret),
 * so the file is 0600 in a 0700 directory, and no log line ever carries it. Writes are coalesced
 * (many changes in one turn cost one write), serialised, and atomic: a temporary file is written
 * and fsynced, then renamed over the old one, so a crash mid-write leaves the old state or the new.
 */

const STATE_FILE = 'state.json';
const FORMAT = 1;

export const SavedActorSchema = z.object({
  id: z.string().min(1).max(64),
  name: z.string().min(1).max(200),
  deployment: NameSchema,
  /** Name of the node it ran on: node ids are not kept, names are what agents register with. */
  node: z.string().min(1).max(256),
  gpus: z.array(z.number().int().min(0)).max(64),
  gpuShare: z.number().min(0).max(1),
  cpus: z.number().min(0),
  memoryBytes: z.number().min(0),
  device: z.string().max(256),
  pid: z.number().int().nullable(),
  restarts: z.number().int().min(0),
  secret: z.string().min(8).max(128),
  /** A class instance's state identity, and whether a process of it served: a process that died while the head was down lost its state. */
  stateId: z.string().min(1).max(64).optional(),
  servedBefore: z.boolean().optional(),
  /**
   * A replica of the spec an update replaced, serving until the new spec's replicas are READY (a
   * surge): adopted after a head restart as that, never as a replica of the new spec.
   */
  superseded: z.boolean().optional(),
});
export type SavedActor = z.infer<typeof SavedActorSchema>;

const StateFileSchema = z.object({
  format: z.literal(FORMAT),
  savedAt: z.string(),
  deployments: z.array(z.unknown()),
  graphs: z.array(z.object({ name: z.string(), doc: z.unknown() })),
  actors: z.array(z.unknown()),
});

export interface SavedState {
  deployments: ModelDeployment[];
  /** Graph documents as they were deployed, by graph name. */
  graphs: Map<string, unknown>;
  actors: SavedActor[];
}

/** What the store asks of the head when it writes: the state to keep, as it is now. */
export type Snapshot = () => { deployments: ModelDeployment[]; actors: SavedActor[] };

/**
 * How long to wait before the next whole-state write after one that held the event loop for
 * `heldMs`, when changes keep coming: four times that, so rewriting the state takes at most a
 * fifth of the head's time however large the state grows. While a 15,000-actor deploy changed
 * the state continuously, back-to-back writes of 0.2-0.5 s each were the largest cost of the head
 * (bench/scale/HISTORY.md). Writes that cost less than a few milliseconds are not spaced.
 */
export function writeSpacingMs(heldMs: number): number {
  return heldMs < 5 ? 0 : 4 * heldMs;
}

/**
 * Keeps the state as it is on disk as `state.json.prev` before a write replaces it: a file damaged
 * later (a disk, an editor, an operator) still leaves the state of one write before.
 */
async function keepPrevious(file: string): Promise<void> {
  const prev = previousOf(file);
  await rm(prev, { force: true });
  try {
    await link(file, prev);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return; // the first write: nothing before it
    // A file system without hard links: a copy does.
    await copyFile(file, prev);
  }
}

export class DurableStore {
  readonly #file: string;
  readonly #log: Logger;
  readonly #graphs = new Map<string, unknown>();
  #snapshot: Snapshot = () => ({ deployments: [], actors: [] });
  #scheduled: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  /** A write is running; `#again`: something changed after its snapshot was taken. */
  #running = false;
  #again = false;
  #closed = false;

  private constructor(dir: string, log: Logger) {
    this.#file = join(dir, STATE_FILE);
    this.#log = log;
  }

  /**
   * Opens the store in `dataDir` and reads what an earlier head left there (nothing if absent).
   * A state file that exists but cannot be read stops the head (TROUPE_ERR_STATE_UNREADABLE,
   * state-file.ts) unless `discardUnreadable`: then it is set aside and the head starts empty.
   */
  static async open(dataDir: string, log: Logger, discardUnreadable = false): Promise<{ store: DurableStore; saved: SavedState }> {
    const store = new DurableStore(dataDir, log);
    const saved: SavedState = { deployments: [], graphs: new Map(), actors: [] };
    const read = await readStateFile(store.#file, StateFileSchema, FORMAT);
    if (!read.found) return { store, saved };
    if (!('state' in read)) {
      const refused = await unreadableState(store.#file, read.problem, StateFileSchema, FORMAT, discardUnreadable);
      if ('error' in refused) throw refused.error;
      log.warn(
        { file: store.#file, setAside: refused.setAside, problem: read.problem },
        'set an unreadable state file aside (--discard-state); starting with no deployments',
      );
      return { store, saved };
    }
    const parsed = { data: read.state };
    for (const d of parsed.data.deployments) {
      const spec = ModelDeploymentSchema.safeParse(d);
      if (spec.success) saved.deployments.push(spec.data);
      else log.warn({ file: store.#file }, 'skipping an invalid deployment in the state file');
    }
    for (const a of parsed.data.actors) {
      const actor = SavedActorSchema.safeParse(a);
      if (actor.success) saved.actors.push(actor.data);
    }
    for (const { name, doc } of parsed.data.graphs) {
      saved.graphs.set(name, doc);
      store.#graphs.set(name, doc);
    }
    return { store, saved };
  }

  /** Where the state of the head is read from and written to. */
  get file(): string {
    return this.#file;
  }

  /** Sets how the current state is read when a write happens. */
  track(snapshot: Snapshot): void {
    this.#snapshot = snapshot;
  }

  /** A graph was deployed (or replaced): it comes back after a restart. */
  setGraph(name: string, doc: unknown): void {
    this.#graphs.set(name, doc);
    this.markDirty();
  }

  deleteGraph(name: string): void {
    if (this.#graphs.delete(name)) this.markDirty();
  }

  /** Something durable changed: a write follows shortly (changes in the same few ms share it). */
  markDirty(): void {
    if (this.#closed || this.#scheduled) return;
    this.#scheduled = setTimeout(() => {
      this.#scheduled = undefined;
      void this.#save();
    }, 10);
  }

  /** Writes whatever is pending now and stops further writes; resolves once it is on disk. */
  async close(): Promise<void> {
    if (this.#scheduled) {
      clearTimeout(this.#scheduled);
      this.#scheduled = undefined;
      await this.#save();
    }
    this.#closed = true;
    await this.#writing;
  }

  /** Resolves once every write asked for so far is on disk (tests and shutdown). */
  async flush(): Promise<void> {
    if (this.#scheduled) {
      clearTimeout(this.#scheduled);
      this.#scheduled = undefined;
      void this.#save();
    }
    await this.#writing;
  }

  /**
   * Writes the state now, or once the write in progress ends: however many saves are asked for
   * meanwhile, one more write follows, of the state as it is then. Each write is the whole state:
   * queueing one per change let writes pile up behind each other at thousands of actors (a
   * 15,000-actor deploy kept the head writing for long after it ended; bench/scale/HISTORY.md).
   * Resolves once what was asked for is on disk.
   */
  #save(): Promise<void> {
    this.#again = true;
    if (this.#running) return this.#writing;
    this.#running = true;
    this.#writing = (async () => {
      try {
        while (this.#again) {
          this.#again = false;
          const pauseMs = writeSpacingMs(await this.#writeOnce());
          if (this.#again && pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
        }
      } finally {
        this.#running = false;
      }
    })();
    return this.#writing;
  }

  /** One write of the whole state; returns how long it held the event loop (the snapshot and its JSON). */
  async #writeOnce(): Promise<number> {
    const began = performance.now();
    const { deployments, actors } = this.#snapshot();
    const body = JSON.stringify({
      format: FORMAT,
      savedAt: new Date().toISOString(),
      deployments,
      graphs: [...this.#graphs].map(([name, doc]) => ({ name, doc })),
      actors,
    });
    const heldMs = performance.now() - began;
    const tmp = `${this.#file}.${newId()}.tmp`;
    try {
      await mkdir(join(this.#file, '..'), { recursive: true, mode: 0o700 });
      const handle = await open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(body);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await keepPrevious(this.#file);
      await rename(tmp, this.#file);
    } catch (err) {
      await rm(tmp, { force: true });
      // Never the body: it holds actor secrets.
      this.#log.error({ file: this.#file, err: (err as Error).message }, 'could not save the head state');
    }
    return heldMs;
  }
}
