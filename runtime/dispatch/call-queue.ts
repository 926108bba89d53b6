import { TroupeError } from '../errors.js';
import { plural } from '../plural.js';
import type { CallReply, CallTiming } from '../protocol/actor.js';
import type { WireTensorMap } from '../tensor/wire.js';

export interface DispatchOptions {
  outputs?: string[];
  /** Absolute time (Date.now()) after which the caller no longer wants the answer. */
  deadline?: number;
  /** The model of a multiplexed deployment's set the call is for (see {@link QueueTarget.maxModels}). */
  model?: string;
}

export interface CallResult {
  outputs: WireTensorMap;
  /** The actor's account of the call (absent if it sent none). */
  timing: CallTiming | undefined;
  /** Time the call waited in this queue for a replica with room. */
  headQueueMs: number;
}

/** One replica as a queue sees it: a connection that carries calls and counts those unanswered. */
export interface Replica {
  readonly inFlight: number;
  call(inputs: WireTensorMap, outputs: string[] | undefined, timeoutMs: number | undefined, model?: string): Promise<CallReply>;
}

/** What a queue serves: a deployment's limits and, at any moment, its replicas that take calls. */
export interface QueueTarget {
  readonly name: string;
  readonly maxQueue: number;
  readonly maxRetries: number;
  /** Calls one replica may hold (see {@link replicaCallLimit}). */
  readonly perReplicaLimit: number;
  /** Replicas that can take a call now. */
  replicas(): Iterable<Replica>;
  /** Whether waiting can help: some replica serves or is on its way. */
  couldServe(): boolean;
  /** The replicas and their states, for the error when none can serve. */
  describeReplicas(): string;
  /** Whether it has replicas and every one is DEAD (calls then fail as not retryable). */
  allDead?(): boolean;
  /**
   * A multiplexed deployment's models per replica: a call for model m goes to a replica with room
   * that holds m (as far as this queue sent it), else to the least loaded one.
   */
  readonly maxModels?: number | undefined;
}

/** Calls a replica may hold: a running batch and the next full one, so it never idles between batches. */
export function replicaCallLimit(maxBatchSize: number): number {
  return Math.max(2, 2 * maxBatchSize);
}

interface Pending {
  inputs: WireTensorMap;
  options: DispatchOptions;
  enqueued: number;
  attempts: number;
  settled: boolean;
  inQueue: boolean;
  timer: NodeJS.Timeout | undefined;
  resolve: (result: CallResult) => void;
  reject: (error: TroupeError) => void;
}

/**
 * How many times its usual room a replica that holds a multiplexed call's model has for it: Ray
 * Serve likewise waits for a replica with the model before it falls back to another.
 */
const HOLDER_ROOM = 4;

/** FNV-1a of a model and a replica's number: the replica with the highest is the model's home. */
export function rendezvous(model: string, replica: number): number {
  let h = 0x811c9dc5;
  const key = `${model}\u0000${replica}`;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** A multiplexed replica's answers that say it does not hold the call's model (nor will without a change). */
const MODEL_NOT_HELD = new Set<string>(['TROUPE_ERR_UNKNOWN_MODEL', 'TROUPE_ERR_MODEL_LOAD', 'TROUPE_ERR_MODEL_TOO_LARGE']);

/** A call without a deadline still waits at most this long for a replica. */
export const MAX_QUEUE_WAIT_MS = 60_000;

/**
 * The queue for one deployment, run by the head (for HTTP, graph and head-routed calls) and by
 * each SDK client for the calls it sends straight to replicas. Replicas pull from it: a call is sent only to a READY
 * replica that has room (one batch running plus one batch forming, so it never idles waiting for
 * the head), the least loaded first. So a call never waits behind a busy replica while another
 * is idle, and the router never caps a replica's batch below its batch size (the pitfall of a
 * too-small max_ongoing_requests in Ray Serve). Past `maxQueue` waiting calls, new calls fail at
 * once with TROUPE_ERR_OVERLOADED; a call whose deadline passes while waiting is dropped unsent.
 */
export class CallQueue {
  readonly #target: QueueTarget;
  #queue: Pending[] = [];
  #head = 0;
  #waiting = 0;
  /** The models each replica of a multiplexed deployment answered a call of: least recently used first. */
  readonly #holds = new WeakMap<Replica, Set<string>>();
  /**
   * Calls out to each replica per model, not yet answered: the replica is loading the model or
   * holds it, so the model's next calls go there too; but only an answer makes it held, so a call
   * for a model that does not exist or does not load leaves the picture of healthy ones as it was.
   */
  readonly #sending = new WeakMap<Replica, Map<string, number>>();
  readonly #ids = new WeakMap<Replica, number>();
  #nextId = 0;

  constructor(target: QueueTarget) {
    this.#target = target;
  }

  /** Calls waiting for a replica. */
  get queued(): number {
    return this.#waiting;
  }

  submit(inputs: WireTensorMap, options: DispatchOptions = {}): Promise<CallResult> {
    if (this.queued >= this.#target.maxQueue && !this.#replicaWithRoom()) {
      return Promise.reject(
        new TroupeError(
          'TROUPE_ERR_OVERLOADED',
          `deployment '${this.#target.name}' has ${plural(this.queued, 'call')} waiting (maxQueue ${this.#target.maxQueue}); retry later`,
        ),
      );
    }
    if (options.deadline !== undefined && options.deadline <= Date.now()) {
      return Promise.reject(
        new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `deployment '${this.#target.name}': deadline passed before the call was sent`),
      );
    }
    return new Promise((resolve, reject) => {
      const call: Pending = {
        inputs,
        options,
        enqueued: Date.now(),
        attempts: 0,
        settled: false,
        inQueue: false,
        timer: undefined,
        resolve,
        reject,
      };
      // The common case goes straight to a replica: no queue entry, and a timer only for a deadline.
      const replica = this.#waiting === 0 ? this.#replicaWithRoom(options.model) : undefined;
      if (options.deadline !== undefined) call.timer = setTimeout(() => this.#expire(call), Math.max(0, options.deadline - call.enqueued));
      if (replica) {
        this.#send(call, replica);
        return;
      }
      this.#enqueue(call, 'back');
      this.pump();
    });
  }

  /** Sends waiting calls to replicas with room. Called on every change that can make room. */
  pump(): void {
    while (this.#waiting > 0) {
      // Only a multiplexed deployment's next call needs looking at first: its model picks the replica.
      const replica = this.#replicaWithRoom(this.#target.maxModels === undefined ? undefined : this.#peek()?.options.model);
      if (!replica) break;
      const call = this.#dequeue();
      if (call) this.#send(call, replica);
    }
    if (this.queued > 0 && !this.#target.couldServe()) {
      const states = this.#target.describeReplicas();
      // Every replica DEAD: nothing will come back without a deploy, so a retry cannot help.
      const code = this.#target.allDead?.() ? 'TROUPE_ERR_ACTOR_DEAD' : 'TROUPE_ERR_NOT_READY';
      this.failAll(new TroupeError(code, `deployment '${this.#target.name}' has no replica that can serve (${states})`));
    }
  }

  /** Rejects every waiting call (the deployment was removed, or cannot serve). */
  failAll(error: TroupeError): void {
    for (let call = this.#dequeue(); call; call = this.#dequeue()) this.#settle(call, error);
    this.#queue = [];
    this.#head = 0;
  }

  #enqueue(call: Pending, where: 'front' | 'back'): void {
    // A call without a deadline still waits at most MAX_QUEUE_WAIT_MS for a replica.
    call.timer ??= setTimeout(() => this.#expire(call), MAX_QUEUE_WAIT_MS);
    call.inQueue = true;
    this.#waiting++;
    if (where === 'back') this.#queue.push(call);
    else if (this.#head > 0) this.#queue[--this.#head] = call;
    else this.#queue.unshift(call);
  }

  /** The oldest live waiting call, left in the queue. */
  #peek(): Pending | undefined {
    for (let i = this.#head; i < this.#queue.length; i++) if (this.#queue[i]!.inQueue) return this.#queue[i];
    return undefined;
  }

  /** The oldest live waiting call; expired ones left in the array are skipped. */
  #dequeue(): Pending | undefined {
    while (this.#head < this.#queue.length) {
      const call = this.#queue[this.#head++]!;
      if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
        this.#queue = this.#queue.slice(this.#head);
        this.#head = 0;
      }
      if (!call.inQueue) continue;
      call.inQueue = false;
      this.#waiting--;
      return call;
    }
    return undefined;
  }

  /**
   * The least loaded replica with room. For a model of a multiplexed deployment: the least loaded
   * replica that holds it, which has room up to HOLDER_ROOM times the limit (a call waiting there
   * for a loaded model costs less than a load elsewhere, which also evicts a model some other call
   * wants); else the model's home among the replicas with room (rendezvous hashing, so each model
   * is loaded by the same replica while it has room, and each replica's models stay a set of their
   * own rather than the leftovers of whichever replica was least busy).
   */
  #replicaWithRoom(model?: string): Replica | undefined {
    let best: Replica | undefined;
    let holder: Replica | undefined;
    let home: Replica | undefined;
    let homeScore = -1;
    const limit = this.#target.perReplicaLimit;
    for (const r of this.#target.replicas()) {
      const holds = model !== undefined && (this.#holds.get(r)?.has(model) === true || this.#sending.get(r)?.has(model) === true);
      if (holds && r.inFlight < HOLDER_ROOM * limit && (!holder || r.inFlight < holder.inFlight)) holder = r;
      if (r.inFlight >= limit) continue;
      if (!best || r.inFlight < best.inFlight) best = r;
      if (model !== undefined) {
        const score = rendezvous(model, this.#idOf(r));
        if (score > homeScore) {
          home = r;
          homeScore = score;
        }
      }
    }
    return holder ?? home ?? best;
  }

  /**
   * The replica a multiplexed deployment's calls of `model` go to first (one that holds it, else
   * its home), whatever their load now: where a repository load of the model belongs.
   */
  placeOf(model: string): Replica | undefined {
    let home: Replica | undefined;
    let homeScore = -1;
    for (const r of this.#target.replicas()) {
      if (this.#holds.get(r)?.has(model)) return r;
      const score = rendezvous(model, this.#idOf(r));
      if (score > homeScore) [home, homeScore] = [r, score];
    }
    return home;
  }

  /** A repository load put `model` in `replica` (true), or an unload took it out (false): calls follow. */
  setHeld(replica: Replica, model: string, held: boolean): void {
    if (held) this.#answeredModel(replica, model);
    else this.#holds.get(replica)?.delete(model);
  }

  /** A number per replica, stable while this queue knows it. */
  #idOf(replica: Replica): number {
    let id = this.#ids.get(replica);
    if (id === undefined) this.#ids.set(replica, (id = this.#nextId++));
    return id;
  }

  /** A call for `model` went to `replica`, or (`delta` -1) came back. */
  #countSending(replica: Replica, model: string, delta: 1 | -1): void {
    let sending = this.#sending.get(replica);
    if (!sending) this.#sending.set(replica, (sending = new Map()));
    const n = (sending.get(model) ?? 0) + delta;
    if (n > 0) sending.set(model, n);
    else sending.delete(model);
  }

  /** Keeps the picture of what `replica` holds: the model just answered goes last, the least recent beyond maxModels out. */
  #answeredModel(replica: Replica, model: string): void {
    const max = this.#target.maxModels;
    if (max === undefined) return;
    let held = this.#holds.get(replica);
    if (!held) this.#holds.set(replica, (held = new Set()));
    held.delete(model);
    held.add(model);
    for (const oldest of held) {
      if (held.size <= max) break;
      held.delete(oldest);
    }
  }

  #send(call: Pending, replica: Replica): void {
    call.attempts++;
    const headQueueMs = Date.now() - call.enqueued;
    const left = call.options.deadline === undefined ? undefined : call.options.deadline - Date.now();
    const model = this.#target.maxModels === undefined ? undefined : call.options.model;
    if (model !== undefined) this.#countSending(replica, model, 1);
    replica.call(call.inputs, call.options.outputs, left, call.options.model).then(
      ({ outputs, timing }) => {
        if (model !== undefined) {
          this.#countSending(replica, model, -1);
          this.#answeredModel(replica, model);
        }
        this.#settle(call, undefined, { outputs, timing, headQueueMs });
        this.pump();
      },
      (err: unknown) => {
        const error = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err));
        if (model !== undefined) {
          this.#countSending(replica, model, -1);
          if (MODEL_NOT_HELD.has(error.code)) this.#holds.get(replica)?.delete(model);
        }
        // A replica that died or began draining never ran the call; try another one.
        const retry =
          (error.code === 'TROUPE_ERR_ACTOR_DIED' || error.code === 'TROUPE_ERR_SHUTTING_DOWN') && call.attempts <= this.#target.maxRetries;
        if (retry && !call.settled) this.#enqueue(call, 'front');
        else this.#settle(call, error);
        this.pump();
      },
    );
  }

  #expire(call: Pending): void {
    if (call.settled) return;
    const waited = Date.now() - call.enqueued;
    // Why none took it, in the replicas' own words (PENDING: no node is ALIVE, say).
    const why =
      call.options.deadline === undefined
        ? `no replica took it within ${MAX_QUEUE_WAIT_MS} ms (${this.#target.describeReplicas()})`
        : `deadline passed after ${waited} ms`;
    this.#settle(call, new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `deployment '${this.#target.name}': ${why}`));
  }

  #settle(call: Pending, error: TroupeError | undefined, result?: CallResult): void {
    if (call.settled) return;
    call.settled = true;
    if (call.inQueue) {
      call.inQueue = false;
      this.#waiting--;
    }
    clearTimeout(call.timer);
    if (error) call.reject(error);
    else call.resolve(result!);
  }
}
