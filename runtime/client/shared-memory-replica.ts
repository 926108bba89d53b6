import type { Replica } from '../dispatch/call-queue.js';
import type { ReplicaLink } from '../dispatch/replica-link.js';
import type { CallReply, ClientToReplica, ClientToReplicaReplies } from '../protocol/actor.js';
import type { DirectInputs } from '../protocol/shared-memory.js';
import { SHARED_MIN_BYTES } from '../shm/tensor-pool.js';
import type { SharedSlot, SharedTensorPool } from '../shm/tensor-pool.js';
import type { WireTensorMap } from '../tensor/wire.js';
import type { Channel } from '../transport/channel.js';

/**
 * A direct connection to a replica that puts a call's large inputs in this client's shared memory
 * instead of the frame, when the replica runs on this host: one copy into a slot instead of two
 * through the kernel's socket buffers (bench/RESULTS-shared-memory.md has the figures).
 *
 * Each region is offered to the replica once, with the call that first needs it going in its
 * frame meanwhile; the replica maps it (or refuses: another host, no addon), and from its answer
 * on, calls name bytes of it. A refusal sends every later tensor of this connection in frames.
 */
export class SharedMemoryReplica<In extends { type: string }> implements Replica {
  readonly #link: ReplicaLink<In, ClientToReplica>;
  readonly #channel: Channel<In, ClientToReplica, typeof ClientToReplicaReplies>;
  readonly #pool: SharedTensorPool;
  /** Regions the replica has mapped, and those offered and not answered yet. */
  readonly #mapped = new Set<number>();
  readonly #offered = new Set<number>();
  /** Why the replica refused a region; set, no more are offered. */
  #refused: string | undefined;

  constructor(
    link: ReplicaLink<In, ClientToReplica>,
    channel: Channel<In, ClientToReplica, typeof ClientToReplicaReplies>,
    pool: SharedTensorPool,
  ) {
    this.#link = link;
    this.#channel = channel;
    this.#pool = pool;
  }

  get inFlight(): number {
    return this.#link.inFlight;
  }

  call(inputs: WireTensorMap, outputs: string[] | undefined, timeoutMs: number | undefined): Promise<CallReply> {
    let sent: DirectInputs | undefined;
    const slots: SharedSlot[] = [];
    for (const [name, t] of Object.entries(inputs)) {
      if (!(t.data instanceof Uint8Array) || t.data.byteLength < SHARED_MIN_BYTES) continue;
      const slot = this.#slotFor(t.data.byteLength);
      if (!slot) continue;
      this.#pool.write(slot, t.data);
      slots.push(slot);
      sent ??= { ...inputs };
      sent[name] = { dtype: t.dtype, shape: t.shape, region: slot.region.id, offset: slot.offset, bytes: t.data.byteLength };
    }
    const answer = this.#link.call(sent ?? inputs, outputs, timeoutMs);
    if (slots.length === 0) return answer;
    // The replica reads a slot until it answers (or its connection is gone): only then is it reused.
    return answer.finally(() => {
      for (const slot of slots) this.#pool.give(slot);
    });
  }

  /** A slot in a region the replica has mapped; none (the input goes in the frame) while one is being offered. */
  #slotFor(bytes: number): SharedSlot | undefined {
    if (this.#refused !== undefined) return undefined;
    let slot: SharedSlot | undefined;
    try {
      slot = this.#pool.take(bytes);
    } catch (err) {
      // The kernel would not make a region (memory limits): this connection's tensors go in frames.
      this.#refused = `cannot make a region: ${(err as Error).message}`;
      return undefined;
    }
    if (!slot || this.#mapped.has(slot.region.id)) return slot;
    this.#pool.give(slot);
    const region = slot.region;
    if (!this.#offered.has(region.id)) {
      this.#offered.add(region.id);
      this.#channel.request(region.offer()).then(
        () => this.#mapped.add(region.id),
        (err: unknown) => (this.#refused ??= (err as Error).message),
      );
    }
    return undefined;
  }
}
