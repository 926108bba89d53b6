import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sharedMemoryAddon } from '../../runtime/internal.js';
import { SHARED_MIN_BYTES, SharedTensorPool } from '../../runtime/shm/tensor-pool.js';

const MiB = 2 ** 20;

test('the pool cuts regions into power-of-two slots, reuses a given-back slot, and stops at its cap', () => {
  const addon = sharedMemoryAddon();
  assert.ok(typeof addon !== 'string', `shared memory is off on this machine: ${String(addon)}`);
  // Room for one region of 1 MiB slots (32 of them, plus the header) and nothing more.
  const pool = new SharedTensorPool(addon, 33 * MiB);
  const image = 3 * 224 * 224 * 4;
  const slots = Array.from({ length: 32 }, () => pool.take(image));
  assert.ok(slots.every((s) => s !== undefined));
  const region = slots[0]!.region;
  assert.equal(region.slotBytes, MiB, '588 KiB rounds up to 1 MiB');
  assert.ok(
    slots.every((s) => s!.region === region),
    'one region while it has free slots',
  );
  const offsets = new Set(slots.map((s) => s!.offset));
  assert.equal(offsets.size, 32, 'no slot handed out twice');
  for (const s of slots) assert.equal(s!.offset % 64, 0, 'slots are aligned for every dtype');
  assert.equal(pool.take(image), undefined, 'at the cap: none, the input goes in its frame');
  pool.give(slots[7]!);
  assert.equal(pool.take(image)?.offset, slots[7]!.offset, 'a given-back slot is the next one taken');
  // Another size gets regions of its own, within the cap.
  assert.equal(pool.take(SHARED_MIN_BYTES), undefined, 'no room left for a region of 64 KiB slots');
  assert.deepEqual(pool.stats, { regions: 1, bytes: region.bytes, tensors: 0 });
  // What is written into a slot is what the region holds there.
  const bytes = Uint8Array.from({ length: image }, (_, i) => i % 251);
  pool.write(slots[3]!, bytes);
  assert.deepEqual(region.view.subarray(slots[3]!.offset, slots[3]!.offset + image), bytes);
  assert.equal(pool.stats.tensors, 1);
});

test('an offer names this process, the region and a nonce the region starts with', () => {
  const addon = sharedMemoryAddon();
  assert.ok(typeof addon !== 'string', String(addon));
  const pool = new SharedTensorPool(addon);
  const slot = pool.take(100 * 1024)!;
  const offer = slot.region.offer();
  assert.equal(offer.pid, process.pid);
  assert.equal(offer.bytes, slot.region.bytes);
  assert.equal(Buffer.from(slot.region.view.subarray(0, offer.nonce.length)).toString('latin1'), offer.nonce);
  // Another mapping of the same memfd sees the same bytes: what an actor does through /proc.
  const again = new Uint8Array(addon.open(offer.pid, offer.fd, offer.bytes));
  slot.region.view[slot.offset] = 42;
  assert.equal(again[slot.offset], 42);
});
