import { TroupeError } from '../errors.js';
import { ActorReference, CallReference, WIRE_FORM } from '../protocol/value-types.js';
import { toWireValue } from '../protocol/values.js';
import { newId } from '../ids.js';
import { currentCallOrigin } from './call-origin.js';
import type { ClientToHead } from '../protocol/client.js';
import type { CallRef } from '../protocol/method-call.js';
import type { ModelDeploymentInput } from '../spec.js';
import type { ConcurrencyGroups } from '../concurrency-groups.js';
import { Future, FutureOutput } from './future.js';
import { ActorStream, DEFAULT_STREAM_WINDOW } from './actor-stream.js';
import type { StreamControls } from './actor-stream.js';
import { MAX_STREAM_WINDOW } from '../protocol/method-call.js';

/**
 * A class actor to deploy: instances of the class `export` of `module` (a path inside the
 * agents' --module-dir), each built with `new Export(...args)` in a process of its own.
 */
export interface ActorSpec {
  name: string;
  /** The module, relative to the agent's --module-dir (a `.ts` name runs the compiled `.js` beside it). */
  module: string;
  /** The exported class. */
  export: string;
  /** The constructor's arguments: JSON values, at most 64 KiB as JSON. */
  args?: unknown[];
  /** How long a restarted instance's `restore()` may take before its process is restarted (default 60). */
  restoreTimeoutS?: number;
  /**
   * Calls one instance runs at once (default 1: one at a time, in the order they reached it).
   * Above 1, up to this many start in order and interleave at their awaits (Ray's async actors'
   * `max_concurrency`); a stream holds one of them while it is open.
   */
  maxConcurrency?: number;
  /**
   * Named concurrency groups (Ray's `concurrency_groups`), each with its own limit and queue in an
   * instance, so its calls never wait behind other groups' (`{ io: { maxConcurrency: 2, methods:
   * ['fetch'] } }`). Methods in no group run in `default`, whose limit is maxConcurrency. A class
   * may declare them too (`static concurrencyGroups`); where both say, this wins.
   */
  concurrencyGroups?: ConcurrencyGroups;
  /**
   * Restarts each instance gets over its life after its process dies (Ray's `max_restarts`): 0 none
   * (DEAD at its first crash; calls then fail with TROUPE_ERR_ACTOR_DEAD naming the cause), -1
   * without end. Default: the head's --max-restarts (5 crashes within 10 minutes).
   */
  maxRestarts?: number;
  /**
   * How many times a call of a method named in `retryable` is sent again after its instance died
   * running it (Ray's `max_task_retries`; -1 without end, default 0). Only for idempotent methods.
   */
  maxTaskRetries?: number;
  /** The methods safe to run again, which maxTaskRetries retries (e.g. `['get']`). */
  retryable?: string[];
  /** Instances (default 1); each keeps its own state. */
  replicas?: number;
  /** CPUs each instance reserves (default 1). */
  cpus?: number;
  /** GPUs each instance holds (fractions share one); the process sees only those (CUDA_VISIBLE_DEVICES). */
  gpus?: number;
  memory?: number | string;
  placement?: 'spread' | 'pack';
  /** Calls that may wait in the head, and that one instance may hold (default 1024); past it TROUPE_ERR_OVERLOADED. */
  maxQueue?: number;
}

/** The deployment spec of a class actor: `kind: 'class'` and `model: 'module#Export'`. */
export function actorDeployment(spec: ActorSpec): ModelDeploymentInput {
  const { module, export: exportName, ...rest } = spec;
  return { ...rest, kind: 'class', model: `${module}#${exportName}` };
}

export interface ActorCallOptions {
  /** Calls with the same key go to the same instance while it lives (its state: a conversation, a cache). */
  sessionKey?: string;
  /** Fail with TROUPE_ERR_DEADLINE_EXCEEDED past this; the method may still run to its end. */
  timeoutMs?: number;
  /**
   * Cancels the call when it aborts, as `future.cancel()` does (a stream: as leaving its loop
   * does). Already aborted: the call fails with TROUPE_ERR_CANCELLED and nothing is sent.
   */
  signal?: AbortSignal;
  /**
   * The concurrency group to run calls in instead of their method's (Ray's
   * `.options(concurrency_group=…)`); `'default'` is the group of methods in no other. A group the
   * actor lacks fails the call with TROUPE_ERR_BAD_REQUEST naming the groups it has.
   */
  concurrencyGroup?: string;
}

type CallMessage = Extract<ClientToHead, { type: 'invoke' }>;
type StreamMessage = Extract<ClientToHead, { type: 'stream' }>;

/** How a handle reaches the head (the cluster's connection). */
export interface ActorTransport {
  /** Sends one call; `timeoutMs` bounds the wait for the answer. */
  call(message: CallMessage, timeoutMs: number | undefined): Promise<{ value: unknown }>;
  /** Opens a streaming call whose items go to `stream`. */
  stream(message: StreamMessage, stream: ActorStream<unknown>): void;
  /** The reader of stream `id` made room for `n` more items. */
  credit(id: string, n: number): void;
  /** The reader of stream `id` stopped reading. */
  cancel(id: string): void;
  /** The caller cancelled call `id`. */
  cancelCall(id: string): void;
}

export interface ActorStreamOptions {
  /** Items the instance may run ahead of the reader (default 16, at most 1024). */
  window?: number;
}

/** How long past a call's deadline the SDK waits for the head's own deadline error. */
const DEADLINE_GRACE_MS = 2000;

/** The Future of an actor call: the head holds its result, so it may be an argument of another call. */
export class CallFuture<T = unknown> extends Future<T> {
  /**
   * @internal Settles once the call has gone to the head (true), or failed before it could go
   * (false): a call that takes this Future is sent after it. Undefined: it went at once.
   */
  readonly sent: Promise<boolean> | undefined;
  readonly #cancel: () => void;

  /** @internal */
  constructor(id: string, promise: Promise<T>, sent?: Promise<boolean>, cancel: () => void = () => {}) {
    super(id, promise);
    this.sent = sent;
    this.#cancel = cancel;
  }

  /**
   * Cancels the call (Ray's `ray.cancel(ref)`): one still queued never runs; a running one is asked
   * to stop (its method's `this.context.signal` aborts). Either way this Future rejects with
   * TROUPE_ERR_CANCELLED, as does a call that takes it as an argument. A call already answered is
   * left as it is; cancelling twice is cancelling once.
   *
   * @example
   * const crawl = crawler.call('fetchAll', urls);
   * setTimeout(() => crawl.cancel(), 1000);
   * await crawl.catch((err) => err.code);   // 'TROUPE_ERR_CANCELLED', unless it finished first
   */
  cancel(): void {
    if (this.status() === 'pending') this.#cancel();
  }
}

/** What a call waits for before it can be sent: runs whose values it takes, calls it takes that have not gone yet. */
interface Waits {
  runs: Set<Future | FutureOutput>;
  calls: Set<CallFuture>;
}

/** The value a run's Future stands for as an argument: its outputs, or the one output named. */
async function runValue(future: Future | FutureOutput): Promise<unknown> {
  if (future instanceof Future) return future;
  if (!future.source)
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `output '${future.output}' of run ${future.run} was not made by this client: await its run first`,
    );
  const outputs = await future.source;
  const output = outputs[future.output];
  if (!output)
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `run ${future.run} has no output '${future.output}' (its outputs: ${Object.keys(outputs).join(', ')})`,
    );
  return output;
}

/** Marks every ActorHandle, whichever build of this module made it (see `Symbol.hasInstance`). */
const HANDLE_BRAND = Symbol.for('troupe.ActorHandle');

/**
 * A handle on a deployed class actor: `call` runs a method on one of its instances and returns a
 * {@link Future} at once. Calls to one instance run one at a time in the order they reach it (up
 * to the spec's maxConcurrency at once, started in that order);
 * state persists between them. Pass a call's Future as an argument of another call and the head
 * feeds its value in, without a round trip through this client.
 *
 * @example
 * const counter = await cluster.actor({ name: 'counter', module: 'counter.js', export: 'Counter', args: [10] });
 * await counter.call('add', 5);                       // 15
 * const total = counter.call('add', counter.call('add', 1));  // the inner result feeds the outer call on the head
 * const alice = counter.session('alice');             // her calls stick to one instance
 */
export class ActorHandle {
  readonly name: string;
  readonly #transport: ActorTransport;
  readonly #options: ActorCallOptions;

  /** @internal use `cluster.actor(spec)` or `cluster.actorHandle(name)` */
  constructor(name: string, transport: ActorTransport, options: ActorCallOptions = {}) {
    this.name = name;
    this.#transport = transport;
    this.#options = options;
    Object.defineProperty(this, HANDLE_BRAND, { value: true });
  }

  /**
   * `value instanceof ActorHandle` holds for handles of either build of this module, as for
   * TroupeError: inside a class actor, a handle passed as an argument or made by
   * `this.context.cluster()` comes from the server's build, while the actor's module imports the
   * class from 'troupe' or '@troupe/client'. Subclasses keep the ordinary prototype check.
   */
  static [Symbol.hasInstance](value: unknown): boolean {
    if (this !== ActorHandle) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[HANDLE_BRAND] === true;
  }

  /**
   * @internal What this handle crosses as when passed as a value (an argument, a return value, a
   * checkpoint): the actor's name and session; the receiving actor makes it a handle on its own client.
   */
  [WIRE_FORM](): ActorReference {
    return new ActorReference(this.name, this.#options.sessionKey);
  }

  /** The same actor, with calls bound to `sessionKey`: they go to the instance the first one went to, while it lives. */
  session(sessionKey: string): ActorHandle {
    return new ActorHandle(this.name, this.#transport, { ...this.#options, sessionKey });
  }

  /** The same actor, with these call options (a deadline, a session, a concurrency group). */
  withOptions(options: ActorCallOptions): ActorHandle {
    return new ActorHandle(this.name, this.#transport, { ...this.#options, ...options });
  }

  /** Runs `method(...args)` on an instance; arguments may be Futures of earlier calls. */
  call<T = unknown>(method: string, ...args: unknown[]): CallFuture<T> {
    const future = this.#call<T>(method, args);
    const { signal } = this.#options;
    if (signal) {
      const cancel = () => future.cancel();
      signal.addEventListener('abort', cancel, { once: true });
      const forget = () => signal.removeEventListener('abort', cancel);
      future.then(forget, forget);
    }
    return future;
  }

  #call<T>(method: string, args: unknown[]): CallFuture<T> {
    const waits: Waits = { runs: new Set(), calls: new Set() };
    const message = this.#message(method, args, newId(), waits);
    const { signal } = this.#options;
    const timeoutMs = message.timeoutMs;
    if (signal?.aborted)
      return new CallFuture<T>(message.id, Promise.reject(this.#cancelled(method, 'its signal was aborted before it was sent')));
    const inherited = currentCallOrigin()?.deadline;
    if (inherited !== undefined && inherited <= Date.now())
      return new CallFuture<T>(
        message.id,
        Promise.reject(
          new TroupeError(
            'TROUPE_ERR_DEADLINE_EXCEEDED',
            `${this.name}.${method}(): the deadline of the call this method runs for has passed, and a nested call inherits it`,
          ),
        ),
      );
    const bound = timeoutMs === undefined ? undefined : timeoutMs + DEADLINE_GRACE_MS;
    if (waits.runs.size === 0 && waits.calls.size === 0) {
      // Sent synchronously, so a call that takes this one's Future always reaches the head after it.
      const answer = this.#transport.call(message, bound);
      return new CallFuture<T>(
        message.id,
        answer.then((a) => a.value as T),
        undefined,
        () => this.#transport.cancelCall(message.id),
      );
    }
    // It takes the value of a run (fetched here: the head keeps runs and calls apart), or a call
    // that has not gone yet: sent once those are in, and before any call that takes its Future.
    let markSent!: (sent: boolean) => void;
    const sent = new Promise<boolean>((resolve) => (markSent = resolve));
    // Cancelled before it went: it never goes, and fails here; after: the head is told.
    let went = false;
    let cancelledHere: ((err: TroupeError) => void) | undefined;
    const cancelled = new Promise<never>((_, reject) => (cancelledHere = reject));
    cancelled.catch(() => {});
    const answer = (async () => {
      try {
        const values = new Map<object, unknown>();
        await Promise.race([
          Promise.all([
            ...[...waits.runs].map(async (run) => values.set(run, await runValue(run))),
            ...[...waits.calls].map(async (call) => {
              if (!(await call.sent)) await call;
            }),
          ]),
          cancelled,
        ]);
        const ready = this.#message(method, args, message.id, { runs: new Set(), calls: new Set() }, values);
        const reply = this.#transport.call(ready, bound);
        went = true;
        return await reply;
      } finally {
        markSent(went);
      }
    })();
    return new CallFuture<T>(
      message.id,
      answer.then((a) => a.value as T),
      sent,
      () => (went ? this.#transport.cancelCall(message.id) : cancelledHere?.(this.#cancelled(method, 'before it was sent'))),
    );
  }

  /**
   * The call's timeout: the handle's, bounded inside a class actor's method by the time left of
   * the call it runs for (a nested call's deadline is at most the outer one's), so the whole chain
   * gives up together.
   */
  #timeoutMs(): number | undefined {
    const own = this.#options.timeoutMs;
    const deadline = currentCallOrigin()?.deadline;
    if (deadline === undefined) return own;
    const left = deadline - Date.now();
    return own === undefined ? left : Math.min(own, left);
  }

  #cancelled(method: string, when: string): TroupeError {
    return new TroupeError('TROUPE_ERR_CANCELLED', `${this.name}.${method}() was cancelled by its caller: ${when}`);
  }

  /**
   * Runs an async generator method and gives its items as they are produced, to read with
   * `for await`. The instance runs at most `window` items ahead of the reader; breaking out of the
   * loop stops the generator. Give `{ window }` as the last argument through {@link streamWith}.
   */
  stream<T = unknown>(method: string, ...args: unknown[]): ActorStream<T> {
    return this.streamWith<T>({}, method, ...args);
  }

  /** {@link stream} with options (the window). */
  streamWith<T = unknown>(options: ActorStreamOptions, method: string, ...args: unknown[]): ActorStream<T> {
    const window = options.window ?? DEFAULT_STREAM_WINDOW;
    if (!Number.isInteger(window) || window < 1 || window > MAX_STREAM_WINDOW)
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `stream window must be a whole number in [1, ${MAX_STREAM_WINDOW}], got ${window}`);
    const waits: Waits = { runs: new Set(), calls: new Set() };
    const message: StreamMessage = { ...this.#message(method, args, newId(), waits), type: 'stream', credit: window };
    if (waits.runs.size > 0 || waits.calls.size > 0)
      throw new TroupeError(
        'TROUPE_ERR_BAD_INPUT',
        `${this.name}.${method}(): a stream's arguments take no Future of a run, nor of a call that waits for one: await it first`,
      );
    const stream = new ActorStream<T>(message.id, window, this.#controls(message.id));
    const { signal } = this.#options;
    if (signal?.aborted) {
      stream.fail(this.#cancelled(method, 'its signal was aborted before it was sent'));
      return stream;
    }
    this.#transport.stream(message, stream as ActorStream<unknown>);
    // An aborted signal stops the generator as leaving the loop does, and the loop throws CANCELLED.
    signal?.addEventListener(
      'abort',
      () => {
        stream.abort(this.#cancelled(method, 'its signal was aborted while it streamed'));
        this.#transport.cancel(message.id);
      },
      { once: true },
    );
    return stream;
  }

  #controls(id: string): StreamControls {
    return {
      grant: (n) => this.#transport.credit(id, n),
      cancel: () => this.#transport.cancel(id),
    };
  }

  /**
   * The call's message. Futures of calls become references the head fills in; a run's Future (or
   * one output of one) becomes its value from `values`, or, not there yet, is added to `waits`
   * (as is a call not yet sent), and the caller sends a message made again once they are in.
   */
  #message(method: string, args: unknown[], id: string, waits: Waits, values = new Map<object, unknown>()): CallMessage {
    const refs: Record<string, CallRef> = {};
    const nested = new Set<string>();
    const substitute = (value: object, where: () => string): unknown => {
      if (value instanceof CallFuture) {
        if (value.sent && !values.has(value)) waits.calls.add(value);
        nested.add(value.id);
        return new CallReference(value.id);
      }
      if (value instanceof Future || value instanceof FutureOutput) {
        if (!values.has(value)) {
          waits.runs.add(value);
          return null;
        }
        return toWireValue(values.get(value), where());
      }
      return undefined;
    };
    const wire = args.map((arg, i) => {
      if (arg instanceof CallFuture) {
        if (arg.sent) waits.calls.add(arg);
        refs[String(i)] = { call: arg.id };
        return null;
      }
      // Checked here, before anything is sent: a value that cannot cross fails this call alone.
      try {
        return toWireValue(arg, `args[${i}]`, substitute);
      } catch (err) {
        if (err instanceof TroupeError) throw new TroupeError(err.code, `${this.name}.${method}(): ${err.message}`);
        throw err;
      }
    });
    const { sessionKey, concurrencyGroup } = this.#options;
    const timeoutMs = this.#timeoutMs();
    const message: CallMessage = { type: 'invoke', id, actor: this.name, method, args: wire };
    if (Object.keys(refs).length > 0) message.refs = refs;
    if (nested.size > 0) message.nestedRefs = [...nested];
    if (sessionKey !== undefined) message.sessionKey = sessionKey;
    if (timeoutMs !== undefined) message.timeoutMs = Math.max(1, timeoutMs);
    if (concurrencyGroup !== undefined) message.concurrencyGroup = concurrencyGroup;
    // Made inside a class actor's method: the head sees the chain of calls waiting on this one.
    const origin = currentCallOrigin();
    if (origin) message.via = origin.via;
    if (origin?.groups) message.viaGroups = origin.groups;
    return message;
  }
}
