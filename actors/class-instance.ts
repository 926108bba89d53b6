import { pathToFileURL } from 'node:url';
import type { z } from 'zod';
import {
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_CONCURRENCY_GROUP,
  TroupeError,
  WireTensorMapSchema,
  encodeFrame,
  groupOfCall,
  groupTable,
  unknownGroup,
  mapFromWire,
  mapToWire,
  toWireValue,
} from '../runtime/internal.js';
import type { CallOrigin, ClassMethods, GroupTable, InvokeReply } from '../runtime/internal.js';
import { classGroups, generatorMethods, methodSignatures, publicMethods } from './class-shape.js';
import type { Concurrency } from './class-shape.js';
import { checkTensorOutputs } from './tensor-outputs.js';
import type { StreamCredit } from './stream-credit.js';
import { Slots } from './slots.js';
import { CallContexts } from './call-context.js';

type Method = (...args: unknown[]) => unknown;

/** The signal of a call nobody can cancel. */
const NEVER = new AbortController().signal;

/** The lifecycle hooks a class may define (docs/actors.md). */
interface Hooks {
  checkpoint?: () => unknown;
  restore?: (state: unknown) => unknown;
  stateSize?: () => unknown;
}

/** The async iterator of what a streaming method returned (an async generator, or any async or sync iterable), or undefined. */
function asyncIterator(value: unknown): AsyncIterator<unknown> | Iterator<unknown> | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as { [Symbol.asyncIterator]?: () => AsyncIterator<unknown>; [Symbol.iterator]?: () => Iterator<unknown> };
  if (typeof v[Symbol.asyncIterator] === 'function') return v[Symbol.asyncIterator]!();
  // Arrays and strings are values, not streams; a generator object is a stream.
  if (!Array.isArray(value) && typeof v[Symbol.iterator] === 'function' && typeof (value as { next?: unknown }).next === 'function')
    return v[Symbol.iterator]!();
  return undefined;
}

/** A graph step's inputs as the head sent them: one map of wire tensors. */
function wireInputs(who: string, value: unknown): z.output<typeof WireTensorMapSchema> {
  const parsed = WireTensorMapSchema.safeParse(value);
  if (!parsed.success)
    throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${who} as a graph step takes a map of tensors: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

/**
 * `value` in the form the encoder takes (runtime/protocol/values.ts), once it is known to cross in
 * one frame; otherwise the error says what is wrong with it and where: a type that cannot cross
 * (TROUPE_ERR_UNSENDABLE_VALUE, or `code` for a checkpoint) or the size.
 */
function sendable(
  what: string,
  value: unknown,
  code: 'TROUPE_ERR_UNSENDABLE_VALUE' | 'TROUPE_ERR_CHECKPOINT_FAILED' = 'TROUPE_ERR_UNSENDABLE_VALUE',
  madeByRuntime = false,
): unknown {
  let wire: unknown;
  let bytes: number;
  try {
    // A graph step's map of wire tensors is the runtime's: its bytes travel as they are, as views.
    wire = madeByRuntime ? value : toWireValue(value, 'value');
    bytes = encodeFrame([wire]).byteLength;
  } catch (err) {
    throw new TroupeError(code, `${what} cannot be sent: ${(err as Error).message}`);
  }
  // Leave room for the envelope and the other messages of the frame.
  const limit = DEFAULT_MAX_FRAME_BYTES - 1024 * 1024;
  if (bytes > limit)
    throw new TroupeError('TROUPE_ERR_TOO_LARGE', `${what} takes ${bytes} bytes, over the ${limit} bytes a frame holds for one value`);
  return wire;
}

/**
 * One instance of a user's class, as a class actor holds it. By default calls run one at a time in
 * the order they arrived (a method that awaits still holds the instance until it returns), so
 * methods never see each other's half-done changes: the actor model's guarantee, and why state
 * needs no locks. With `maxConcurrency` N above 1 (Ray's async actors), up to N calls start in
 * arrival order and interleave at their awaits; a stream holds one of the N slots while it is open.
 * Concurrency groups (Ray's concurrency_groups) give methods their own limit and queue: a call
 * waits only for its group's calls (slots.ts).
 */
export class ClassInstance {
  readonly className: string;
  readonly methods: readonly string[];
  /** The methods and their declared tensor signatures, for `ready`. */
  readonly signatures: ClassMethods;
  /** The methods that are generators, for `ready`: a graph step on one of them streams. */
  readonly streaming: readonly string[];
  /** Each concurrency group with its limit and methods; undefined when there is only `default`. */
  readonly groups: GroupTable | undefined;
  readonly #instance: Record<string, unknown> & Hooks;
  readonly #slots: Slots;
  readonly #contexts: CallContexts;
  #ran = 0;
  #failed = 0;
  #computeMs = 0;
  #restored = false;
  #stateBytes: number | undefined;
  /** The longest a call may run (see bounded), and who hears of a call that ran past it. */
  #maxCallMs: number | undefined;
  #onOverrun: ((why: TroupeError) => void) | undefined;
  /** Set once a call overran: what the calls behind it fail with. */
  #overran: TroupeError | undefined;

  private constructor(
    className: string,
    instance: Record<string, unknown> & Hooks,
    cls: { signatures?: unknown; concurrencyGroups?: unknown },
    concurrency: Concurrency,
    contexts: CallContexts,
  ) {
    this.className = className;
    this.#contexts = contexts;
    contexts.install(instance, className);
    this.#instance = instance;
    this.methods = publicMethods(instance);
    this.signatures = methodSignatures(cls, this.methods, className);
    this.streaming = generatorMethods(instance, this.methods);
    const own = classGroups(cls, className);
    const table = groupTable(className, this.methods, concurrency.maxConcurrency, own, concurrency.groups);
    this.groups = Object.keys(table).length > 1 ? table : undefined;
    const named = Object.entries(table).filter(([name]) => name !== DEFAULT_CONCURRENCY_GROUP);
    this.#slots = new Slots(concurrency.maxConcurrency, Object.fromEntries(named.map(([name, g]) => [name, g.maxConcurrency])));
  }

  /**
   * Imports `modulePath`, finds the class `exportName` and builds one instance with `args`, running
   * up to `maxConcurrency` calls at once (more in named groups: `concurrency`); its methods read
   * their call's context from `contexts`.
   */
  static async create(
    modulePath: string,
    shownPath: string,
    exportName: string,
    args: unknown[],
    concurrency: Concurrency = { maxConcurrency: 1 },
    contexts = new CallContexts({ deployment: exportName, instance: exportName }),
  ): Promise<ClassInstance> {
    let mod: Record<string, unknown>;
    try {
      mod = (await import(pathToFileURL(modulePath).href)) as Record<string, unknown>;
    } catch (err) {
      throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `cannot import ${shownPath}: ${(err as Error).message}`);
    }
    const cls = mod[exportName];
    if (typeof cls !== 'function' || !cls.prototype) {
      const has =
        Object.keys(mod)
          .filter((k) => typeof mod[k] === 'function')
          .join(', ') || 'nothing callable';
      throw new TroupeError(
        'TROUPE_ERR_MODEL_LOAD',
        `class '${exportName}' of ${shownPath} is not an exported class (the module exports ${has})`,
      );
    }
    let instance: unknown;
    try {
      instance = new (cls as new (...a: unknown[]) => unknown)(...args);
    } catch (err) {
      throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `new ${exportName}(...args) threw: ${(err as Error)?.message ?? String(err)}`);
    }
    return new ClassInstance(
      exportName,
      instance as Record<string, unknown> & Hooks,
      cls as { signatures?: unknown },
      concurrency,
      contexts,
    );
  }

  /**
   * Bounds every call (and every item of a stream) to `ms`: past it the call fails with
   * TROUPE_ERR_DEADLINE_EXCEEDED and `overran` hears of it. The method cannot be stopped, and the
   * calls behind it would wait on it forever, so the process must restart (class-host.ts).
   */
  boundCalls(ms: number, overran: (why: TroupeError) => void): void {
    this.#maxCallMs = ms;
    this.#onOverrun = overran;
  }

  /** `work`, or a rejection once it ran past the bound. */
  #bounded<T>(work: Promise<T> | T, who: string): Promise<T> {
    const ms = this.#maxCallMs;
    if (ms === undefined || !(work instanceof Promise)) return Promise.resolve(work);
    let timer: NodeJS.Timeout | undefined;
    const overrun = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const why = new TroupeError(
          'TROUPE_ERR_DEADLINE_EXCEEDED',
          `${who} ran past ${ms} ms, the longest a call may run (the agent's --max-inference-ms); the instance restarts`,
        );
        this.#overran ??= new TroupeError('TROUPE_ERR_ACTOR_DIED', `the instance is restarting: ${why.message}`);
        this.#onOverrun?.(why);
        reject(why);
      }, ms);
    });
    return Promise.race([work, overrun]).finally(() => clearTimeout(timer));
  }

  /** Calls waiting for the instance, the running one included. */
  get queued(): number {
    return this.#slots.queued;
  }

  get stats(): {
    calls: number;
    failed: number;
    computeMs: number;
    queued: number;
    stateBytes?: number;
    groups?: Record<string, { running: number; waiting: number }>;
  } {
    const load = this.groups ? this.#slots.load() : undefined;
    return {
      calls: this.#ran,
      failed: this.#failed,
      computeMs: this.#computeMs,
      queued: this.#slots.queued,
      ...(this.#stateBytes !== undefined ? { stateBytes: this.#stateBytes } : {}),
      ...(load
        ? { groups: Object.fromEntries(Object.entries(load).map(([n, g]) => [n, { running: g.running, waiting: g.waiting }])) }
        : {}),
    };
  }

  /**
   * Runs `method` once every call of its concurrency group (`group`, else its method's) that
   * arrived before it started and a slot of the group is free; answers with its value and, if the
   * class keeps one, the checkpoint after it. `signal` cancels it: waiting, it leaves unrun
   * (rejecting with the signal's reason); running, the method sees it aborted as `this.context.signal`.
   */
  invoke(
    method: string,
    args: unknown[],
    tensors = false,
    signal: AbortSignal = NEVER,
    origin?: CallOrigin,
    group?: string,
  ): Promise<InvokeReply> {
    const unknown = this.#unknown(method) ?? unknownGroup(this.className, method, this.groups, group);
    if (unknown) return Promise.reject(unknown);
    return this.#serial(false, () => this.#run(method, args, tensors, signal, origin), signal, groupOfCall(this.groups, method, group));
  }

  /**
   * Runs an async generator method as {@link invoke} runs a method, sending each item as it is
   * produced while `credit` allows; answers with the count of items. Its slot in its group (the
   * whole group when its limit is 1) is held until the generator ends (or is cancelled, which
   * runs its `finally`), so calls stay in order.
   * A graph step's stream (`tensors`) takes a map of tensors and yields maps of tensors.
   */
  stream(
    method: string,
    args: unknown[],
    credit: StreamCredit,
    send: (seq: number, value: unknown) => void,
    tensors = false,
    signal: AbortSignal = NEVER,
    group?: string,
  ): Promise<InvokeReply> {
    const unknown = this.#unknown(method) ?? unknownGroup(this.className, method, this.groups, group);
    if (unknown) return Promise.reject(unknown);
    return this.#serial(
      false,
      async () => {
        const who = `${this.className}.${method}()`;
        const started = performance.now();
        let items = 0;
        try {
          let produced: unknown;
          try {
            const given = tensors ? [mapFromWire(wireInputs(who, args[0]), 'input')] : args;
            produced = this.#contexts.run(signal, () => (this.#instance[method] as Method)(...given));
          } catch (err) {
            if (err instanceof TroupeError) throw err;
            throw new TroupeError('TROUPE_ERR_METHOD_FAILED', `${who} threw: ${(err as Error)?.message ?? String(err)}`);
          }
          const iterator = asyncIterator(produced);
          if (!iterator)
            throw new TroupeError(
              'TROUPE_ERR_METHOD_FAILED',
              `${who} returned no stream: streaming calls are for async generator methods (async *${method}() { yield … })`,
            );
          let ended = false;
          try {
            while (await credit.take()) {
              let next: IteratorResult<unknown>;
              try {
                // Each step inside the call's context: the generator's body runs in next().
                next = await this.#bounded(
                  this.#contexts.run(signal, () => iterator.next()),
                  who,
                );
              } catch (err) {
                ended = true;
                if (err instanceof TroupeError && err.code === 'TROUPE_ERR_DEADLINE_EXCEEDED') throw err;
                throw new TroupeError(
                  'TROUPE_ERR_METHOD_FAILED',
                  `${who} threw after ${items} items: ${(err as Error)?.message ?? String(err)}`,
                );
              }
              if (next.done) {
                ended = true;
                break;
              }
              const item = tensors
                ? mapToWire(checkTensorOutputs(`item ${items} of ${who}`, next.value, 'TROUPE_ERR_METHOD_FAILED'))
                : next.value;
              send(items, sendable(`item ${items} of ${who}`, item, 'TROUPE_ERR_UNSENDABLE_VALUE', tensors));
              items++;
            }
          } finally {
            // A cancelled stream (or one whose item could not be sent) ends the generator, so its `finally` blocks run now.
            if (!ended) await Promise.resolve(iterator.return?.(undefined)).catch(() => {});
          }
        } catch (err) {
          this.#failed++;
          throw err;
        } finally {
          this.#computeMs += performance.now() - started;
        }
        this.#ran++;
        return this.#checkpointed(method, { value: items });
      },
      signal,
      groupOfCall(this.groups, method, group),
    );
  }

  #unknown(method: string): TroupeError | undefined {
    if (this.methods.includes(method)) return undefined;
    return new TroupeError(
      'TROUPE_ERR_UNKNOWN_METHOD',
      `class '${this.className}' has no method '${method}' (its methods: ${this.methods.join(', ') || 'none'})`,
    );
  }

  /**
   * Hands the last checkpoint of the instance this process replaces to `restore()`. Only before
   * the first call: a process that rejoins the head after a dropped connection kept its state and
   * ignores it. A class without `restore` starts fresh (what it loses is in docs/actors.md).
   */
  restore(state: unknown): Promise<void> {
    // Alone on the instance whatever maxConcurrency and the groups say: no call may see a half-restored state.
    return this.#serial(true, async () => {
      if (this.#restored || this.#ran > 0 || this.#failed > 0) return;
      this.#restored = true;
      // Bounded like a call: a restore that never settles would hold the instance before its first call.
      if (typeof this.#instance.restore === 'function') await this.#bounded(this.#instance.restore(state), `${this.className}.restore()`);
      await this.#measure();
    });
  }

  async #run(method: string, args: unknown[], tensors: boolean, signal: AbortSignal, origin?: CallOrigin): Promise<InvokeReply> {
    const started = performance.now();
    const who = `${this.className}.${method}()`;
    let value: unknown;
    try {
      // A graph step's call: tensors in (checked against their bytes), tensors out.
      const given = tensors ? [mapFromWire(wireInputs(who, args[0]), 'input')] : args;
      value = await this.#bounded(
        this.#contexts.run(signal, () => (this.#instance[method] as Method)(...given), origin),
        who,
      );
      if (tensors) value = mapToWire(checkTensorOutputs(who, value, 'TROUPE_ERR_METHOD_FAILED'));
    } catch (err) {
      this.#failed++;
      if (err instanceof TroupeError) throw err;
      // A method that stopped because its caller cancelled it (its signal's AbortError, or anything it threw then).
      if (signal.aborted)
        throw new TroupeError(
          'TROUPE_ERR_CANCELLED',
          `${who} stopped after its caller cancelled it: ${(err as Error)?.message ?? String(err)}`,
        );
      throw new TroupeError('TROUPE_ERR_METHOD_FAILED', `${who} threw: ${(err as Error)?.message ?? String(err)}`);
    } finally {
      this.#computeMs += performance.now() - started;
    }
    try {
      if (!tensors && asyncIterator(value))
        throw new TroupeError('TROUPE_ERR_METHOD_FAILED', `${who} returns a stream: read it with handle.stream('${method}', …)`);
      value = sendable(`the value ${who} returned`, value, 'TROUPE_ERR_UNSENDABLE_VALUE', tensors);
    } catch (err) {
      this.#failed++;
      throw err;
    }
    this.#ran++;
    return this.#checkpointed(method, { value });
  }

  /** `reply`, with the checkpoint after the call when the class keeps one. */
  async #checkpointed(method: string, reply: InvokeReply): Promise<InvokeReply> {
    if (typeof this.#instance.checkpoint === 'function') {
      let state: unknown;
      try {
        state = await this.#bounded(this.#instance.checkpoint(), `${this.className}.checkpoint()`);
      } catch (err) {
        throw new TroupeError(
          'TROUPE_ERR_CHECKPOINT_FAILED',
          `${this.className}.${method}() ran, but checkpoint() threw: ${(err as Error)?.message ?? String(err)}`,
        );
      }
      reply.checkpoint = { state: sendable(`the checkpoint after ${this.className}.${method}()`, state, 'TROUPE_ERR_CHECKPOINT_FAILED') };
    }
    await this.#measure();
    return reply;
  }

  /** The state size the class reports, if it has `stateSize()`; a throwing or odd answer reports none. */
  async #measure(): Promise<void> {
    if (typeof this.#instance.stateSize !== 'function') return;
    try {
      const size = await this.#instance.stateSize();
      this.#stateBytes = typeof size === 'number' && Number.isFinite(size) && size >= 0 ? size : undefined;
    } catch {
      this.#stateBytes = undefined;
    }
  }

  #serial<T>(exclusive: boolean, work: () => Promise<T>, signal?: AbortSignal, group?: string): Promise<T> {
    // Behind a call that overran, nothing more runs: the process is about to restart.
    return this.#slots.run(exclusive, () => (this.#overran ? Promise.reject(this.#overran) : work()), signal, group);
  }
}
