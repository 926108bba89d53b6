import { newSecret } from '../ids.js';
import type { RegionOffer } from '../protocol/shared-memory.js';
import type { SharedMemoryAddon } from './addon.js';
import { REGION_HEADER_BYTES, writeNonce } from './region-header.js';

/** Tensors smaller than this go in their frame: a socket moves them as cheaply as a slot would. */
export const SHARED_MIN_BYTES = 64 * 1024;
/** About this much a region, cut into slots of one size. */
const REGION_TARGET_BYTES = 32 * 2 ** 20;
/** Default cap on all of a client's regions together (memfd pages are only allocated once written). */
export const DEFAULT_POOL_BYTES = 512 * 2 ** 20;

/** One region: a memfd this process made, cut into equal slots. */
export class SharedRegion {
  readonly id: number;
  readonly bytes: number;
  readonly slotBytes: number;
  readonly view: Uint8Array;
  /** Offsets of the slots no call holds. */
  readonly free: number[];
  readonly #fd: number;
  readonly #nonce = newSecret();

  constructor(addon: SharedMemoryAddon, id: number, slotBytes: number, slots: number) {
    const { buffer, fd } = addon.create(REGION_HEADER_BYTES + slotBytes * slots);
    this.id = id;
    this.bytes = buffer.byteLength;
    this.slotBytes = slotBytes;
    this.view = new Uint8Array(buffer);
    this.#fd = fd;
    writeNonce(this.view, this.#nonce);
    this.free = Array.from({ length: slots }, (_, i) => REGION_HEADER_BYTES + (slots - 1 - i) * slotBytes);
  }

  /** What an actor needs to map this region (see RegionOfferSchema). */
  offer(): Omit<RegionOffer, 'id'> {
    return { type: 'region', region: this.id, pid: process.pid, fd: this.#fd, bytes: this.bytes, nonce: this.#nonce };
  }
}

/** A slot a call holds: `region.view` from `offset`, at least as long as the tensor put there. */
export interface SharedSlot {
  region: SharedRegion;
  offset: number;
}

/**
 * A client's shared memory for the large inputs it sends to actors on its host: regions made on
 * demand, each cut into slots of one power-of-two size, so a slot freed by one call fits the next
 * of the same size. A call holds its slots until its answer arrives (the actor reads them until
 * it answers); past `maxBytes` of regions, inputs go in frames instead of waiting for a slot.
 */
export class SharedTensorPool {
  readonly #addon: SharedMemoryAddon;
  readonly #maxBytes: number;
  readonly #regions: SharedRegion[] = [];
  #bytes = 0;
  #placed = 0;

  constructor(addon: SharedMemoryAddon, maxBytes = DEFAULT_POOL_BYTES) {
    this.#addon = addon;
    this.#maxBytes = maxBytes;
  }

  /** A free slot of at least `bytes`, in a new region if every one of that size is held; undefined at the cap. */
  take(bytes: number): SharedSlot | undefined {
    const slotBytes = Math.max(SHARED_MIN_BYTES, 2 ** Math.ceil(Math.log2(bytes)));
    let region = this.#regions.find((r) => r.slotBytes === slotBytes && r.free.length > 0);
    if (!region) {
      const slots = Math.max(1, Math.floor(REGION_TARGET_BYTES / slotBytes));
      const size = REGION_HEADER_BYTES + slots * slotBytes;
      if (this.#bytes + size > this.#maxBytes) return undefined;
      region = new SharedRegion(this.#addon, this.#regions.length, slotBytes, slots);
      this.#regions.push(region);
      this.#bytes += size;
    }
    return { region, offset: region.free.pop()! };
  }

  /** Copies a tensor's bytes into a slot taken for them. */
  write(slot: SharedSlot, bytes: Uint8Array): void {
    slot.region.view.set(bytes, slot.offset);
    this.#placed++;
  }

  give(slot: SharedSlot): void {
    slot.region.free.push(slot.offset);
  }

  /** Regions made, their bytes, and inputs placed in them so far. */
  get stats(): { regions: number; bytes: number; tensors: number } {
    return { regions: this.#regions.length, bytes: this.#bytes, tensors: this.#placed };
  }
}
