import { TroupeError } from '../errors.js';
import type { DirectInputs, RegionOffer } from '../protocol/shared-memory.js';
import type { WireTensorMap } from '../tensor/wire.js';
import type { SharedMemoryAddon } from './addon.js';
import { REGION_HEADER_BYTES, hasNonce } from './region-header.js';

/** What one connection may have mapped at once: enough for any client pool (runtime/shm/tensor-pool.ts). */
export const MAX_MAPPED_REGIONS = 256;
export const MAX_MAPPED_BYTES = 8 * 2 ** 30;

/**
 * The regions one client connection offered an actor, mapped, and the resolution of its calls'
 * shared inputs into ordinary wire tensors: views of the mapping, which the client leaves alone
 * until it has the call's answer. Dropping the object (when the connection closes) lets the
 * collector unmap the regions.
 */
export class MappedRegions {
  readonly #addon: SharedMemoryAddon | string;
  readonly #regions = new Map<number, Uint8Array>();
  #bytes = 0;

  constructor(addon: SharedMemoryAddon | string) {
    this.#addon = addon;
  }

  /** Maps an offered region; throws TROUPE_ERR_SHARED_MEMORY naming why it cannot. */
  accept(offer: RegionOffer): void {
    const refuse = (why: string) => new TroupeError('TROUPE_ERR_SHARED_MEMORY', `cannot map region ${offer.region}: ${why}`);
    if (typeof this.#addon === 'string') throw refuse(this.#addon);
    if (this.#regions.has(offer.region)) throw refuse('it is mapped already');
    if (this.#regions.size >= MAX_MAPPED_REGIONS) throw refuse(`this connection has ${MAX_MAPPED_REGIONS} regions mapped, the most it may`);
    if (this.#bytes + offer.bytes > MAX_MAPPED_BYTES) throw refuse(`this connection would map more than ${MAX_MAPPED_BYTES / 2 ** 30} GiB`);
    if (offer.bytes <= REGION_HEADER_BYTES) throw refuse(`a region holds its ${REGION_HEADER_BYTES}-byte header and more`);
    let region: Uint8Array;
    try {
      region = new Uint8Array(this.#addon.open(offer.pid, offer.fd, offer.bytes));
    } catch (err) {
      throw refuse((err as Error).message);
    }
    // Another host's or namespace's process may hold a region under the same pid and fd.
    if (!hasNonce(region, offer.nonce))
      throw refuse(`/proc/${offer.pid}/fd/${offer.fd} is not the offering client's region (its nonce differs)`);
    this.#regions.set(offer.region, region);
    this.#bytes += offer.bytes;
  }

  /**
   * The call's inputs as wire tensors, those in shared memory as views of their regions. Throws
   * TROUPE_ERR_SHARED_MEMORY for a region this connection did not map or bytes outside it.
   */
  resolve(inputs: DirectInputs): WireTensorMap {
    let resolved: WireTensorMap | undefined;
    for (const [name, input] of Object.entries(inputs)) {
      if (!('region' in input)) continue;
      const region = this.#regions.get(input.region);
      if (!region)
        throw new TroupeError(
          'TROUPE_ERR_SHARED_MEMORY',
          `input '${name}' names region ${input.region}, which this connection has not mapped`,
        );
      if (input.offset < REGION_HEADER_BYTES || input.offset + input.bytes > region.byteLength) {
        throw new TroupeError(
          'TROUPE_ERR_SHARED_MEMORY',
          `input '${name}': bytes ${input.offset}..${input.offset + input.bytes} are outside region ${input.region} (slots span ${REGION_HEADER_BYTES}..${region.byteLength})`,
        );
      }
      resolved ??= { ...(inputs as WireTensorMap) };
      resolved[name] = { dtype: input.dtype, shape: input.shape, data: region.subarray(input.offset, input.offset + input.bytes) };
    }
    return resolved ?? (inputs as WireTensorMap);
  }
}
