import { DEFAULT_CONCURRENCY_GROUP, MAX_QUEUE_WAIT_MS, TroupeError, groupOfCall, plural, unknownGroup } from '../../runtime/internal.js';
import type { InvokeReply, LinkStream } from '../../runtime/internal.js';
import type { ActorRecord, DeploymentRecord } from '../state/records.js';

/** How long a call whose instance died waits for the agent's report of why, to name it. */
const DEATH_REPORT_MS = 5_000;

/** Sessions one class deployment remembers; past it the oldest binding is forgotten (its next call may land elsewhere). */
export const MAX_SESSIONS = 100_000;

export interface MethodCallOptions {
  /** Calls with the same key go to the same instance while it lives. */
  sessionKey?: string | undefined;
  /** Absolute time (Date.now()) after which the caller no longer wants the answer. */
  deadline?: number | undefined;
  /** The instance the call was made from (a client inside a class actor), to refuse one that would wait on itself. */
  from?: string | undefined;
  /**
   * The state each instance had when it last answered this caller (instance name -> state id): an
   * instance whose state began anew since fails the call with TROUPE_ERR_STATE_LOST instead of
   * answering from a fresh state as if nothing happened.
   */
  seen?: Readonly<Record<string, string>> | undefined;
  /**
   * The instances whose running calls wait on this one, outermost first, ending with `from`, each
   * with the concurrency group it runs that call in (unknown: `default`): a call to one of them in
   * that same group, whose limit is 1, would wait on itself through the cycle.
   */
  via?: { id: string; name: string; group?: string | undefined }[] | undefined;
  /** The concurrency group to run the call in instead of its method's. */
  concurrencyGroup?: string | undefined;
  /** A graph step's call: the one argument is a map of wire tensors, and so is the answer. */
  tensors?: boolean | undefined;
  /**
   * Aborted when the caller cancels (docs/actors.md, Cancelling calls): a waiting call fails at once
   * with TROUPE_ERR_CANCELLED and is never sent; a sent one fails the same way and the instance is
   * told, so the method's context signal aborts.
   */
  signal?: AbortSignal | undefined;
  /**
   * A streaming call: `credit` items may come before more are granted; `onItem` gets each one,
   * and `onStart` the controls once the call reached an instance. A started stream has no
   * deadline: its reader paces it, and cancels it.
   */
  stream?:
    { credit: number; onItem: (seq: number, value: unknown) => void; onStart: (controls: Omit<LinkStream, 'done'>) => void } | undefined;
}

interface Waiting {
  method: string;
  args: unknown[];
  options: MethodCallOptions;
  enqueued: number;
  timer: NodeJS.Timeout;
  settled: boolean;
  /** The instance it was sent to, once sent (named when it is cancelled). */
  sentTo?: string;
  /** Times it was sent again after its instance died running it (maxTaskRetries). */
  retries: number;
  onAbort?: () => void;
  resolve: (reply: ServedReply) => void;
  reject: (error: TroupeError) => void;
}

/** A method's answer, with the instance that gave it and the identity of the state it answered from. */
export type ServedReply = InvokeReply & { instance: string; stateId?: string | undefined };

/** An actor that will take calls again without a new placement: it is READY, starting or restarting. */
function alive(a: ActorRecord): boolean {
  return a.state === 'READY' || a.state === 'STARTING' || a.state === 'PENDING' || a.state === 'RESTARTING';
}

/**
 * Method calls of one class deployment, waiting in the head for an instance. A call goes to the
 * instance its session is bound to (waiting while that instance restarts, since a restart
 * restores its checkpoint), else to the READY instance with the fewest calls in flight. Calls
 * leave in arrival order, and each instance starts its calls in the order they reach it (running
 * up to its maxConcurrency at once, one by default), so calls of one session start in the order
 * they were made, and with the default run in that order too. Unlike tensor calls, a method call is never
 * retried on another instance: it may have changed the state of the one that died.
 */
export class MethodQueue {
  readonly #d: DeploymentRecord;
  #waiting: Waiting[] = [];
  /** Session key -> the instance it is bound to, and that instance's state generation then (insertion order: oldest first). */
  readonly #sessions = new Map<string, { actorId: string; stateId: string | undefined }>();
  /** Instance id -> sessions bound to it. */
  readonly #bound = new Map<string, number>();
  #turn = 0;
  /** Calls whose instance died running them with no restart left, waiting for the cause (#settleDying). */
  #dying: { call: Waiting; actor: ActorRecord; error: TroupeError; until: number }[] = [];
  #dyingTimer: NodeJS.Timeout | undefined;

  constructor(d: DeploymentRecord) {
    this.#d = d;
  }

  get queued(): number {
    return this.#waiting.length;
  }

  submit(method: string, args: unknown[], options: MethodCallOptions = {}): Promise<ServedReply> {
    const name = this.#d.spec.name;
    if (this.#waiting.length >= this.#d.spec.maxQueue) {
      return Promise.reject(
        new TroupeError(
          'TROUPE_ERR_OVERLOADED',
          `actor '${name}' has ${plural(this.#waiting.length, 'call')} waiting (maxQueue ${this.#d.spec.maxQueue}); retry later`,
        ),
      );
    }
    if (options.signal?.aborted) return Promise.reject(this.#cancelled(method));
    return new Promise((resolve, reject) => {
      const enqueued = Date.now();
      const wait = options.deadline === undefined ? MAX_QUEUE_WAIT_MS : Math.max(0, options.deadline - enqueued);
      const call: Waiting = {
        method,
        args,
        options,
        enqueued,
        settled: false,
        retries: 0,
        resolve,
        reject,
        timer: undefined as unknown as NodeJS.Timeout,
      };
      call.timer = setTimeout(() => this.#expire(call), wait);
      if (options.signal) {
        call.onAbort = () => {
          this.#settle(call, this.#cancelled(method, call.sentTo));
          // Out of the queue now, so it no longer counts against maxQueue.
          if (call.sentTo === undefined) this.#waiting = this.#waiting.filter((c) => c !== call);
        };
        options.signal.addEventListener('abort', call.onAbort, { once: true });
      }
      this.#waiting.push(call);
      this.pump();
    });
  }

  /**
   * A call of a method the spec names `retryable` whose instance died running it goes back to the
   * front of the queue, up to maxTaskRetries times (Ray's max_task_retries): it runs again on the
   * instance once restarted (its session's), or on another. True if it went back.
   */
  #retry(call: Waiting): boolean {
    const { maxTaskRetries = 0, retryable } = this.#d.spec;
    if (maxTaskRetries === 0 || !retryable?.includes(call.method)) return false;
    if (maxTaskRetries >= 0 && call.retries >= maxTaskRetries) return false;
    call.retries++;
    call.sentTo = undefined;
    this.#waiting.unshift(call);
    this.pump();
    return true;
  }

  /** `a` will not be restarted once its death is known: its maxRestarts are used up (or it is DEAD already). */
  #outOfRestarts(a: ActorRecord): boolean {
    const own = this.#d.spec.maxRestarts;
    return a.state === 'DEAD' || (own !== undefined && own >= 0 && a.restarts >= own);
  }

  /**
   * Calls whose instance died running them and will not come back: they fail with the
   * non-retryable TROUPE_ERR_ACTOR_DEAD naming the cause once the agent reports the exit (the
   * socket closes first), or with the ACTOR_DIED they got if no report comes in time.
   */
  #settleDying(): void {
    const now = Date.now();
    this.#dying = this.#dying.filter(({ call, actor, error, until }) => {
      if (call.settled) return false;
      if (actor.state === 'DEAD') {
        this.#settle(
          call,
          new TroupeError(
            'TROUPE_ERR_ACTOR_DEAD',
            `${this.#d.spec.name}.${call.method}(): instance ${actor.name} died running it and is DEAD: ${actor.reason ?? 'no cause kept'}`,
          ),
        );
        return false;
      }
      // Until the exit is reported its socket may just have dropped (STARTING: reconnecting); RESTARTING means it comes back after all.
      if (now < until && actor.state !== 'RESTARTING') return true;
      this.#settle(call, error);
      return false;
    });
    if (this.#dying.length > 0) {
      clearTimeout(this.#dyingTimer);
      this.#dyingTimer = setTimeout(() => this.#settleDying(), Math.max(1, this.#dying[0]!.until - now));
      this.#dyingTimer.unref();
    }
  }

  /** Sends waiting calls whose instance can take them, oldest first. Called on every change that can make room. */
  pump(): void {
    if (this.#dying.length > 0) this.#settleDying();
    if (this.#waiting.length === 0) return;
    const left: Waiting[] = [];
    for (const call of this.#waiting) {
      if (call.settled) continue;
      const actor = this.#pick(call);
      const refused =
        actor instanceof TroupeError || !actor
          ? undefined
          : (unknownGroup(this.#d.spec.name, call.method, actor.classGroups, call.options.concurrencyGroup) ??
            this.#waitsOnItself(call, actor) ??
            this.#stateGone(call, actor));
      if (actor instanceof TroupeError) this.#settle(call, actor);
      else if (refused) this.#settle(call, refused);
      else if (actor?.link?.invoke) this.#send(call, actor);
      else left.push(call);
    }
    this.#waiting = left;
    if (left.length > 0 && !this.#d.actors.some(alive) && (this.#d.spec.autoscale?.maxReplicas ?? 0) === 0) {
      const actors = this.#d.actors;
      const states =
        actors.map((a) => `${a.name} ${a.state}${a.state === 'DEAD' && a.reason ? `: ${a.reason}` : ''}`).join(', ') || 'no replicas';
      // Every instance DEAD: none comes back without a deploy, so the error says a retry cannot help.
      const dead = actors.length > 0 && actors.every((a) => a.state === 'DEAD');
      this.failAll(
        new TroupeError(
          dead ? 'TROUPE_ERR_ACTOR_DEAD' : 'TROUPE_ERR_NOT_READY',
          `actor '${this.#d.spec.name}' has no instance that can take calls (${states})`,
        ),
      );
    }
  }

  failAll(error: TroupeError): void {
    const calls = [...this.#waiting, ...this.#dying.map((d) => d.call)];
    this.#waiting = [];
    this.#dying = [];
    for (const call of calls) this.#settle(call, error);
  }

  /**
   * The instance for `call` now, undefined to keep it waiting, or the error it fails with: a
   * session whose instance lost what it held is told so once, and its next call starts anew.
   */
  #pick(call: Waiting): ActorRecord | TroupeError | undefined {
    const key = call.options.sessionKey;
    if (key !== undefined) {
      const bound = this.#sessions.get(key);
      const actor = bound === undefined ? undefined : this.#d.actors.find((a) => a.id === bound.actorId);
      if (actor && alive(actor)) {
        if (actor.stateId === bound!.stateId) return this.#hasRoom(actor) ? actor : undefined;
        // It came back without its state: only once READY is that known (a checkpoint would have been restored).
        this.#bind(key, actor.id);
        return this.#lost(key, actor.stateLost ?? `instance ${actor.name} restarted with no checkpoint to restore`);
      }
      if (bound !== undefined) {
        this.#unbind(key);
        return this.#lost(
          key,
          actor
            ? `instance ${actor.name} is DEAD (${actor.reason ?? 'no cause kept'})`
            : 'its instance was removed (scaled down, replaced by an update, or placed anew)',
        );
      }
    }
    // A new session goes to the instance holding the fewest sessions (state is what they cost),
    // a call without one to the least busy; ties rotate, so idle instances all take turns.
    const actors = this.#d.actors;
    const start = this.#turn++ % Math.max(1, actors.length);
    const score = (a: ActorRecord) => (key !== undefined ? [this.#bound.get(a.id) ?? 0, a.link!.inFlight] : [a.link!.inFlight, 0]);
    let best: ActorRecord | undefined;
    let bestScore: number[] = [];
    for (let i = 0; i < actors.length; i++) {
      const a = actors[(start + i) % actors.length]!;
      if (!this.#hasRoom(a)) continue;
      const s = score(a);
      if (!best || s[0]! < bestScore[0]! || (s[0] === bestScore[0] && s[1]! < bestScore[1]!)) [best, bestScore] = [a, s];
    }
    if (best && key !== undefined) this.#bind(key, best.id);
    return best;
  }

  /** The concurrency group `call` runs in on instance `a`, and that group's limit there. */
  #groupOf(call: Waiting, a: ActorRecord): { group: string; limit: number } {
    const group = groupOfCall(a.classGroups, call.method, call.options.concurrencyGroup);
    const limit = a.classGroups?.[group]?.maxConcurrency ?? this.#d.spec.maxConcurrency ?? 1;
    return { group, limit };
  }

  /**
   * The error for a call that `a` itself made from a call running in the group this one goes to,
   * whose limit is 1: it would start only once that call ended, which waits for it. A call made
   * from another group's call just waits its turn. Seen through a cycle (A -> B -> A) when the
   * chain of instances came with the call.
   */
  #waitsOnItself(call: Waiting, a: ActorRecord): TroupeError | undefined {
    const { group, limit } = this.#groupOf(call, a);
    if (limit > 1 || (a.link?.inFlight ?? 0) < limit) return undefined;
    const via = call.options.via ?? (call.options.from ? [{ id: call.options.from, name: a.name }] : []);
    const at = via.findIndex((v) => v.id === a.id);
    if (at < 0 || (via[at]!.group ?? DEFAULT_CONCURRENCY_GROUP) !== group) return undefined;
    const name = this.#d.spec.name;
    const where =
      group === DEFAULT_CONCURRENCY_GROUP ? 'with maxConcurrency 1' : `in concurrency group '${group}', whose maxConcurrency is 1`;
    const fix =
      group === DEFAULT_CONCURRENCY_GROUP
        ? 'deploy with maxConcurrency above 1'
        : `give group '${group}' a maxConcurrency above 1, or call it in another group`;
    if (at === via.length - 1)
      return new TroupeError(
        'TROUPE_ERR_DEADLOCK',
        `${name}.${call.method}() was called by instance ${a.name} on itself (${a.name} -> ${a.name}) while it runs a call, ${where}: it would wait behind the call that made it forever. Call the method directly (this.${call.method}()), or ${fix}`,
      );
    const cycle = [...via.slice(at).map((v) => v.name), a.name].join(' -> ');
    return new TroupeError(
      'TROUPE_ERR_DEADLOCK',
      `${name}.${call.method}() would wait on itself through a cycle (${cycle}): instance ${a.name} runs the call that waits on this one, ${where}, so this one could start only after it ended. Break the cycle, or ${fix.replace('deploy with', `deploy ${name} with`)}`,
    );
  }

  /**
   * The error for a call whose caller saw instance `a` answer from a state that is gone since (it
   * restarted with no checkpoint to restore): said once, since the caller forgets what it saw then.
   */
  #stateGone(call: Waiting, a: ActorRecord): TroupeError | undefined {
    const saw = call.options.seen?.[a.name];
    if (saw === undefined || a.stateId === undefined || saw === a.stateId) return undefined;
    return new TroupeError(
      'TROUPE_ERR_STATE_LOST',
      `actor '${this.#d.spec.name}': ${a.stateLost ?? `instance ${a.name} is a new one (the actor was deployed anew, or an update replaced its instances)`}; the state this client's earlier calls left on it is lost, and ${call.method}() did not run (the next call runs on the instance as it is now)`,
    );
  }

  #hasRoom(a: ActorRecord): boolean {
    // An instance holds at most maxQueue calls of its own (its queue is bounded like the head's),
    // but always room for the maxConcurrency it runs at once, so a small maxQueue never caps them.
    // With concurrency groups, what all of them run at once.
    const running = a.classGroups
      ? Object.values(a.classGroups).reduce((n, g) => n + g.maxConcurrency, 0)
      : (this.#d.spec.maxConcurrency ?? 1);
    const room = Math.max(1, this.#d.spec.maxQueue, running);
    return a.state === 'READY' && a.link !== undefined && !a.link.closed && a.link.inFlight < room;
  }

  #lost(key: string, why: string): TroupeError {
    return new TroupeError(
      'TROUPE_ERR_STATE_LOST',
      `session '${key.slice(0, 64)}' of actor '${this.#d.spec.name}': ${why}; the state it held for this session is lost (the session's next call starts anew)`,
    );
  }

  #bind(key: string, actorId: string): void {
    this.#unbind(key);
    if (this.#sessions.size >= MAX_SESSIONS) this.#unbind(this.#sessions.keys().next().value!);
    const stateId = this.#d.actors.find((a) => a.id === actorId)?.stateId;
    this.#sessions.set(key, { actorId, stateId });
    this.#bound.set(actorId, (this.#bound.get(actorId) ?? 0) + 1);
  }

  #unbind(key: string): void {
    const actorId = this.#sessions.get(key)?.actorId;
    if (actorId === undefined) return;
    this.#sessions.delete(key);
    const left = (this.#bound.get(actorId) ?? 1) - 1;
    if (left > 0) this.#bound.set(actorId, left);
    else this.#bound.delete(actorId);
  }

  #send(call: Waiting, actor: ActorRecord): void {
    const started = Date.now();
    const stream = call.options.stream;
    let sent: Promise<InvokeReply>;
    if (stream && actor.link!.invokeStream) {
      clearTimeout(call.timer);
      const group = actor.classGroups ? this.#groupOf(call, actor).group : undefined;
      const { done, ...controls } = actor.link!.invokeStream(
        call.method,
        call.args,
        stream.credit,
        stream.onItem,
        call.options.tensors,
        group,
      );
      stream.onStart(controls);
      sent = done;
    } else {
      // The instance's context learns the chain and the time left, and calls its method makes carry them on.
      const { deadline, via } = call.options;
      // With groups, the instance is told the group the head resolved, and the chain learns it too.
      const group = actor.classGroups ? this.#groupOf(call, actor).group : undefined;
      const viaGroups = [...(via ?? []).map((v) => v.group ?? DEFAULT_CONCURRENCY_GROUP), group ?? DEFAULT_CONCURRENCY_GROUP];
      const origin = {
        via: [...(via ?? []).map((v) => v.id), actor.id],
        timeoutMs: deadline === undefined ? undefined : deadline - Date.now(),
        group,
        // Absent where every call of the chain runs in `default`, as it does without groups.
        viaGroups: viaGroups.some((g) => g !== DEFAULT_CONCURRENCY_GROUP) ? viaGroups : undefined,
      };
      sent = actor.link!.invoke!(call.method, call.args, call.options.tensors, call.options.signal, origin);
    }
    call.sentTo = actor.name;
    sent.then(
      (reply) => {
        // Kept on the record, which outlives the process: a restart of this instance restores it.
        if (reply.checkpoint) actor.checkpoint = reply.checkpoint;
        this.#d.stats.record(Date.now() - started);
        this.#settle(call, undefined, { ...reply, instance: actor.name, stateId: actor.stateId });
        this.pump();
      },
      (err: unknown) => {
        const error = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err));
        this.#d.stats.record(Date.now() - started, error.code);
        if (error.code === 'TROUPE_ERR_ACTOR_DIED' && !stream && !call.settled) {
          if (this.#retry(call)) return;
          if (this.#outOfRestarts(actor)) {
            this.#dying.push({ call, actor, error, until: Date.now() + DEATH_REPORT_MS });
            this.pump();
            return;
          }
        }
        this.#settle(call, error);
        this.pump();
      },
    );
  }

  #expire(call: Waiting): void {
    const waited = Date.now() - call.enqueued;
    const why =
      call.options.deadline === undefined
        ? `no instance took the call within ${MAX_QUEUE_WAIT_MS} ms`
        : `deadline passed after ${waited} ms`;
    // A call already sent may still run: the instance cannot be stopped halfway through a method.
    this.#settle(call, new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `actor '${this.#d.spec.name}': ${why}`));
  }

  /** What a cancelled call fails with: where it was when its caller cancelled it. */
  #cancelled(method: string, sentTo?: string): TroupeError {
    const where = sentTo
      ? `while instance ${sentTo} ran it (its context's signal aborted; what it changed before it stopped stays)`
      : 'before it ran';
    return new TroupeError('TROUPE_ERR_CANCELLED', `${this.#d.spec.name}.${method}() was cancelled by its caller ${where}`);
  }

  #settle(call: Waiting, error: TroupeError | undefined, reply?: ServedReply): void {
    if (call.settled) return;
    call.settled = true;
    clearTimeout(call.timer);
    if (call.onAbort) call.options.signal?.removeEventListener('abort', call.onAbort);
    if (error) call.reject(error);
    else call.resolve(reply!);
  }
}
