import { TroupeError } from '../runtime/index.js';
import type { CallTiming, WireTensorMap } from '../runtime/index.js';
import type { ActorLink } from './actor-link.js';
import type { ActorRecord, DeploymentRecord } from './state.js';

export interface DispatchOptions {
  outputs?: string[];
  /** Absolute time (Date.now()) after which the caller no longer wants the answer. */
  deadline?: number;
}

export interface CallResult {
  outputs: WireTensorMap;
  /** The actor's account of the call (absent if it sent none). */
  timing: CallTiming | undefined;
  /** Time the call waited in the head for a replica with room. */
  headQueueMs: number;
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

/** A call without a deadline still waits at most this long for a replica. */
export const MAX_QUEUE_WAIT_MS = 60_000;

type ReadyActor = ActorRecord & { link: ActorLink };

/**
 * The head's queue for one deployment. Replicas pull from it: a call is sent only to a READY
 * replica that has room (one batch running plus one batch forming, so it never idles waiting for
 * the head), the least loaded first. So a call never waits behind a busy replica while another
 * is idle, and the router never caps a replica's batch below its batch size (the pitfall of a
 * too-small max_ongoing_requests in Ray Serve). Past `maxQueue` waiting calls, new calls fail at
 * once with TROUPE_ERR_OVERLOADED; a call whose deadline passes while waiting is dropped unsent.
 */
export class Dispatcher {
  readonly #d: DeploymentRecord;
  #queue: Pending[] = [];
  #head = 0;
  #waiting = 0;

  constructor(d: DeploymentRecord) {
    this.#d = d;
  }

  /** Calls waiting for a replica. */
  get queued(): number {
    return this.#waiting;
  }

  /** Calls a replica may hold: a running batch and the next full one. */
  get perReplicaLimit(): number {
    return Math.max(2, 2 * this.#d.spec.batch.maxSize);
  }

  submit(inputs: WireTensorMap, options: DispatchOptions = {}): Promise<CallResult> {
    if (this.queued >= this.#d.spec.maxQueue && !this.#replicaWithRoom()) {
      return Promise.reject(
        new TroupeError('TROUPE_ERR_OVERLOADED', `deployment '${this.#d.spec.name}' has ${this.queued} calls waiting (maxQueue ${this.#d.spec.maxQueue}); retry later`),
      );
    }
    if (options.deadline !== undefined && options.deadline <= Date.now()) {
      return Promise.reject(new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `deployment '${this.#d.spec.name}': deadline passed before the call was sent`));
    }
    return new Promise((resolve, reject) => {
      const call: Pending = { inputs, options, enqueued: Date.now(), attempts: 0, settled: false, inQueue: false, timer: undefined, resolve, reject };
      // The common case goes straight to a replica: no queue entry, and a timer only for a deadline.
      const replica = this.#waiting === 0 ? this.#replicaWithRoom() : undefined;
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
      const replica = this.#replicaWithRoom();
      if (!replica) break;
      const call = this.#dequeue();
      if (call) this.#send(call, replica);
    }
    if (this.queued > 0 && !this.#couldServe()) {
      const states = this.#d.actors.map((a) => `${a.name} ${a.state}`).join(', ') || 'no replicas';
      this.failAll(new TroupeError('TROUPE_ERR_NOT_READY', `deployment '${this.#d.spec.name}' has no replica that can serve (${states})`));
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

  #replicaWithRoom(): ReadyActor | undefined {
    let best: ReadyActor | undefined;
    const limit = this.perReplicaLimit;
    for (const a of this.#d.actors) {
      if (a.state !== 'READY' || !a.link || a.link.closed || a.link.inFlight >= limit) continue;
      if (!best || a.link.inFlight < best.link.inFlight) best = a as ReadyActor;
    }
    return best;
  }

  /** Whether waiting can help: some replica is READY or on its way. */
  #couldServe(): boolean {
    if ((this.#d.spec.autoscale?.maxReplicas ?? 0) > 0) return true;
    return this.#d.actors.some((a) => a.state === 'READY' || a.state === 'STARTING' || a.state === 'PENDING' || a.state === 'RESTARTING');
  }

  #send(call: Pending, replica: ReadyActor): void {
    call.attempts++;
    const headQueueMs = Date.now() - call.enqueued;
    const left = call.options.deadline === undefined ? undefined : call.options.deadline - Date.now();
    replica.link.call(call.inputs, call.options.outputs, left).then(
      ({ outputs, timing }) => {
        this.#settle(call, undefined, { outputs, timing, headQueueMs });
        this.pump();
      },
      (err: unknown) => {
        const error = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err));
        // A replica that died or began draining never ran the call; try another one.
        const retry = (error.code === 'TROUPE_ERR_ACTOR_DIED' || error.code === 'TROUPE_ERR_SHUTTING_DOWN') && call.attempts <= this.#d.spec.maxRetries;
        if (retry && !call.settled) this.#enqueue(call, 'front');
        else this.#settle(call, error);
        this.pump();
      },
    );
  }

  #expire(call: Pending): void {
    if (call.settled) return;
    const waited = Date.now() - call.enqueued;
    const why = call.options.deadline === undefined ? `no replica had room within ${MAX_QUEUE_WAIT_MS} ms` : `deadline passed after ${waited} ms`;
    this.#settle(call, new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `deployment '${this.#d.spec.name}': ${why}`));
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
