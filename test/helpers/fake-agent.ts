import assert from 'node:assert/strict';
import type { AgentLink, StartActorOrder } from '../../head/control/agent-link.js';
import type { Clock, ClockTimer } from '../../head/control/clock.js';
import type { HeadActorLink } from '../../head/state/records.js';
import { TroupeError } from '../../runtime/errors.js';
import type { CallReply } from '../../runtime/protocol/actor.js';
import type { WireTensorMap } from '../../runtime/tensor/wire.js';

// Fakes at the controller's edges, for unit tests without processes: a node agent's connection
// and an actor's data-plane link. They answer as the test says, and behave like the real ones
// where the controller relies on it (a closed connection fails what it holds as retryable).

interface Start {
  order: StartActorOrder;
  /** The agent started the process. */
  started: (pid: number) => void;
  /** The agent could not start it. */
  failed: (error: TroupeError) => void;
}

/** One agent connection: start orders wait for the test's answer; stop orders are recorded. */
export class FakeAgent implements AgentLink {
  closed = false;
  readonly starts: Start[] = [];
  readonly stops: { actorId: string; graceMs: number }[] = [];

  startActor(order: StartActorOrder): Promise<{ pid: number }> {
    if (this.closed) return Promise.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'connection is closed'));
    return new Promise((resolve, reject) => this.starts.push({ order, started: (pid) => resolve({ pid }), failed: reject }));
  }

  stopActor(actorId: string, graceMs: number): Promise<void> {
    // As the real link: a closed connection sends nothing, and the stop still resolves.
    if (!this.closed) this.stops.push({ actorId, graceMs });
    return Promise.resolve();
  }

  close(): void {
    this.closed = true;
    // As a channel does: requests still waiting fail when the connection goes.
    for (const start of this.starts.splice(0)) start.failed(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'connection closed'));
  }

  /** The oldest start order not yet answered, taken off the list. */
  nextStart(): Start {
    const start = this.starts.shift();
    assert.ok(start, 'no start order is waiting on this agent');
    return start;
  }
}

interface HeldCall {
  answer: () => void;
  reject: (error: unknown) => void;
}

/** One actor's link to the head: calls are held until the test answers them. */
export class FakeActorLink implements HeadActorLink {
  closed = false;
  closedBecause: string | undefined;
  terminatedBecause: string | undefined;
  readonly #calls: HeldCall[] = [];
  readonly #idle: (() => void)[] = [];
  readonly #clock: Clock;

  /** `clock` times whenIdle's bound, as the real link's timer would. */
  constructor(clock: Clock) {
    this.#clock = clock;
  }

  get inFlight(): number {
    return this.#calls.length;
  }

  call(inputs: WireTensorMap): Promise<CallReply> {
    // The reply echoes the inputs.
    return new Promise((resolve, reject) => this.#calls.push({ answer: () => resolve({ outputs: inputs }), reject }));
  }

  /** Answers the oldest call in flight. */
  answer(): void {
    const call = this.#calls.shift();
    assert.ok(call, 'no call in flight on this link');
    call.answer();
    if (this.#calls.length === 0) for (const resolve of this.#idle.splice(0)) resolve();
  }

  whenIdle(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0 || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      // `timer` is read only when `done` runs, which is after it is set.
      const done = () => (this.#clock.clearTimeout(timer), resolve());
      const timer: ClockTimer = this.#clock.setTimeout(done, timeoutMs);
      this.#idle.push(done);
    });
  }

  close(reason: string): void {
    this.closed = true;
    this.closedBecause = reason;
  }

  terminate(reason?: string): void {
    this.closed = true;
    this.terminatedBecause = reason;
    for (const call of this.#calls.splice(0))
      call.reject(new TroupeError('TROUPE_ERR_ACTOR_DIED', `the head dropped the actor's connection (${reason}) before answering`));
  }
}
