import { MAX_CALL_DEPTH, TroupeError, replaceCallReferences, toWireValue } from '../../runtime/internal.js';
import type { LinkStream, MethodCall } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';
import { CallResults } from './call-results.js';
import { Dispatcher } from './dispatcher.js';
import type { ServedReply } from './method-queue.js';

/** One streaming call as the head relays it: items passed on, and the reader's credit and cancel until it reached an instance. */
interface StreamControl {
  items: number;
  cancelled: boolean;
  pendingCredit: number;
  started?: Omit<LinkStream, 'done'>;
}

/** A method call as every entry point gives it (SDK frames, HTTP): the SDK's message without its type. */
export type MethodCallRequest = Omit<MethodCall, 'type'>;

/**
 * The arguments as every entry point gave them, checked as a sender checks them (runtime/protocol/
 * values.ts: what can cross, nesting, size) before they are queued or encoded: JSON from HTTP may
 * hold what no process could decode, a frame from a client that is not the SDK anything msgpack
 * can say, and a value nested thousands deep overflowed the head's stack in the encoder. Entry
 * points that answer before the call starts (server-sent events) check with it at their door too.
 */
export function checkMethodArgs(actor: string, method: string, args: readonly unknown[]): unknown[] {
  try {
    return args.map((arg, i) => toWireValue(arg, `args[${i}]`));
  } catch (err) {
    if (err instanceof TroupeError) throw new TroupeError(err.code, `${actor}.${method}(): ${err.message}`);
    throw err;
  }
}

/**
 * The head's service for method calls on class actors, called by every entry point so they
 * cannot drift: finds the actor, fills in arguments that are Futures of earlier calls, queues the
 * call for an instance (method-queue.ts) and keeps its result for calls that take it as a Future.
 */
export class ActorCalls {
  readonly #state: ClusterState;
  readonly #results = new CallResults();
  /** Streams in progress, by caller (a client connection) and the caller's id for them. */
  readonly #streams = new WeakMap<object, Map<string, StreamControl>>();
  /** Calls in progress that their caller may cancel, by caller and the caller's id for them. */
  readonly #calls = new WeakMap<object, Map<string, AbortController>>();

  constructor(state: ClusterState) {
    this.#state = state;
  }

  /**
   * Runs one call (made from inside instance `from`, if given); resolves with the method's value,
   * the instance that answered and the identity of the state it answered from. `caller` (a client
   * connection) may cancel it by its id ({@link cancelCall}); `signal` cancels it too (an HTTP
   * request whose connection closed).
   */
  call(
    request: MethodCallRequest,
    from?: string,
    caller?: object,
    signal?: AbortSignal,
  ): Promise<{ value: unknown; instance?: string; stateId?: string }> {
    const cancel = new AbortController();
    const onAbort = () => cancel.abort();
    if (signal?.aborted) cancel.abort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const calls = caller === undefined ? undefined : (this.#calls.get(caller) ?? new Map<string, AbortController>());
    if (caller !== undefined && calls) {
      this.#calls.set(caller, calls);
      calls.set(request.id, cancel);
    }
    const served = this.#run(request, from, cancel.signal).finally(() => {
      signal?.removeEventListener('abort', onAbort);
      if (calls?.get(request.id) === cancel) calls.delete(request.id);
    });
    // Kept for calls that take it as a Future; its failure reaches the caller below, and them.
    void this.#results.add(
      request.id,
      served.then((s) => s.value),
    );
    return served.then(({ value, instance, stateId }) => ({ value, instance, ...(stateId === undefined ? {} : { stateId }) }));
  }

  /** The caller of call `id` no longer wants it: queued, it never runs; running, its instance is told (the method's signal aborts). */
  cancelCall(caller: object, id: string): void {
    this.#calls.get(caller)?.get(id)?.abort();
  }

  /**
   * Runs one streaming call for `caller` (a client connection): `push` sends each item on as it
   * arrives; resolves with their count after the last. `caller` scopes the stream's id for
   * {@link credit} and {@link cancel}, and {@link closed} cancels what a caller leaves behind.
   */
  async stream(
    caller: object,
    request: MethodCallRequest & { credit: number },
    push: (seq: number, value: unknown) => void,
    from?: string,
  ): Promise<{ items: number }> {
    const streams = this.#streams.get(caller) ?? new Map<string, StreamControl>();
    this.#streams.set(caller, streams);
    if (streams.has(request.id))
      throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `stream '${request.id}' is already open on this connection`);
    const control: StreamControl = { items: 0, cancelled: false, pendingCredit: 0 };
    streams.set(request.id, control);
    try {
      const d = this.#classActor(request);
      const args = await this.#resolveRefs(request);
      const deadline = request.timeoutMs === undefined ? undefined : Date.now() + request.timeoutMs;
      const reply = await d.dispatcher.methods.submit(request.method, args, {
        sessionKey: request.sessionKey,
        seen: request.seen,
        deadline,
        from,
        via: this.#via(request, from),
        concurrencyGroup: request.concurrencyGroup,
        stream: {
          credit: request.credit,
          onItem: (seq, value) => {
            control.items++;
            push(seq, value);
          },
          onStart: (controls) => {
            control.started = controls;
            if (control.cancelled) controls.cancel();
            else if (control.pendingCredit > 0) controls.credit(control.pendingCredit);
          },
        },
      });
      return { items: typeof reply.value === 'number' ? reply.value : control.items };
    } catch (err) {
      // Say how far the reader got, so nothing is lost or read twice without it being said.
      if (err instanceof TroupeError && control.items > 0)
        throw new TroupeError(err.code, `${err.message} (after item ${control.items - 1} of the stream; no later item was sent)`);
      throw err;
    } finally {
      streams.delete(request.id);
    }
  }

  /** The reader of stream `id` took `n` more items' room. */
  credit(caller: object, id: string, n: number): void {
    const control = this.#streams.get(caller)?.get(id);
    if (!control) return;
    if (control.started) control.started.credit(n);
    else control.pendingCredit += n;
  }

  /** The reader of stream `id` is done: the generator stops (its `finally` runs), even before it started. */
  cancel(caller: object, id: string): void {
    const control = this.#streams.get(caller)?.get(id);
    if (!control) return;
    control.cancelled = true;
    control.started?.cancel();
  }

  /** `caller` (an HTTP request) went away: the calls it made are cancelled too, as by {@link cancelCall}. */
  cancelCalls(caller: object): void {
    for (const cancel of this.#calls.get(caller)?.values() ?? []) cancel.abort();
  }

  /** `caller` went away: its streams stop. */
  closed(caller: object): void {
    for (const id of this.#streams.get(caller)?.keys() ?? []) this.cancel(caller, id);
    this.#streams.delete(caller);
  }

  /** Throws what a call to `actor` would fail with when it is no class actor (for answers that must know before they start). */
  check(actor: string): void {
    this.#classActor({ actor });
  }

  #classActor(request: Pick<MethodCallRequest, 'actor'>): DeploymentRecord & { dispatcher: Dispatcher } {
    const d = this.#state.deployments.get(request.actor);
    if (!d) {
      const known = [...this.#state.deployments.values()].filter((x) => x.spec.kind === 'class').map((x) => `'${x.spec.name}'`);
      throw new TroupeError(
        'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
        `no actor named '${request.actor}' (class actors: ${known.join(', ') || 'none'})`,
      );
    }
    if (d.spec.kind !== 'class' || !(d.dispatcher instanceof Dispatcher)) {
      throw new TroupeError(
        'TROUPE_ERR_NOT_A_CLASS_ACTOR',
        `'${request.actor}' is a ${d.spec.kind ?? 'model'} deployment, not a class actor: run it with tensors (cluster.run)`,
      );
    }
    return d as DeploymentRecord & { dispatcher: Dispatcher };
  }

  async #run(request: MethodCallRequest, from: string | undefined, signal: AbortSignal): Promise<ServedReply> {
    const deadline = request.timeoutMs === undefined ? undefined : Date.now() + request.timeoutMs;
    const d = this.#classActor(request);
    const args = await this.#resolveRefs(request);
    // Bound to the deployment as it was when the call arrived: a replaced deployment gets a new dispatcher.
    // A call cancelled while its arguments were resolved is refused by submit, unsent.
    return d.dispatcher.methods.submit(request.method, args, {
      sessionKey: request.sessionKey,
      seen: request.seen,
      deadline,
      from,
      via: this.#via(request, from),
      concurrencyGroup: request.concurrencyGroup,
      signal,
    });
  }

  /**
   * The chain of instances waiting on a call, ending with `from`: what the client inside `from`
   * said (its method's context), believed only from a client whose hello proved it is `from`.
   */
  #via(request: MethodCallRequest, from: string | undefined): { id: string; name: string; group?: string | undefined }[] | undefined {
    if (from === undefined) return undefined;
    const said = request.via?.at(-1) === from;
    const ids = said ? request.via! : [...(request.via ?? []), from];
    // The group each instance runs its waiting call in, as the head told it: only with the chain it came with.
    const groups = said && request.viaGroups?.length === ids.length ? request.viaGroups : undefined;
    // The instance it goes to joins the chain too, which may be at most MAX_CALL_DEPTH long.
    if (ids.length >= MAX_CALL_DEPTH)
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `${request.actor}.${request.method}(): a chain of nested calls may pass through at most ${MAX_CALL_DEPTH} instances`,
      );
    return ids.map((id, i) => ({ id, name: this.#state.actors.get(id)?.name ?? id, group: groups?.[i] }));
  }

  /** The arguments, with those that name earlier calls (Futures) replaced by their values. */
  async #resolveRefs(request: MethodCallRequest): Promise<unknown[]> {
    const args = checkMethodArgs(request.actor, request.method, request.args);
    const refs = Object.entries(request.refs ?? {});
    await Promise.all(
      refs.map(async ([index, ref]) => {
        const at = Number(index);
        try {
          args[at] = await this.#results.get(ref.call);
        } catch (err) {
          const cause = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err));
          const how = cause.code === 'TROUPE_ERR_UNKNOWN_CALL' ? '' : ` failed with ${cause.code}`;
          throw new TroupeError(
            cause.code,
            `argument ${at} of ${request.actor}.${request.method}() is call ${ref.call}, which${how ? how : ' is unknown'}: ${cause.message}`,
          );
        }
      }),
    );
    // Arguments past the end that only refs filled must leave no holes.
    for (let i = 0; i < args.length; i++) if (!(i in args)) args[i] = null;
    if (request.nestedRefs?.length) return this.#resolveNested(request, args);
    return args;
  }

  /** The arguments with the Futures nested inside them (CallReferences) replaced by their calls' values. */
  async #resolveNested(request: MethodCallRequest, args: unknown[]): Promise<unknown[]> {
    const values = new Map<string, unknown>();
    await Promise.all(
      (request.nestedRefs ?? []).map(async (call) => {
        try {
          values.set(call, await this.#results.get(call));
        } catch (err) {
          const cause = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err));
          throw new TroupeError(
            cause.code,
            `a Future inside the arguments of ${request.actor}.${request.method}() is call ${call}, which failed with ${cause.code}: ${cause.message}`,
          );
        }
      }),
    );
    return args.map((arg) =>
      replaceCallReferences(arg, (call) => {
        if (!values.has(call))
          throw new TroupeError('TROUPE_ERR_BAD_MESSAGE', `the arguments refer to call ${call}, which nestedRefs does not list`);
        return values.get(call);
      }),
    );
  }
}
