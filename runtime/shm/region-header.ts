/**
 * The first bytes of every region: the client writes its nonce there (ASCII), and an actor that
 * mapped the region checks it before taking calls that name it. Slots start after the header, at
 * an offset that keeps every dtype's typed-array views aligned.
 */
export const REGION_HEADER_BYTES = 64;

export function writeNonce(region: Uint8Array, nonce: string): void {
  region.fill(0, 0, REGION_HEADER_BYTES);
  region.set(Buffer.from(nonce, 'latin1').subarray(0, REGION_HEADER_BYTES));
}

export function hasNonce(region: Uint8Array, nonce: string): boolean {
  const expected = Buffer.from(nonce, 'latin1').subarray(0, REGION_HEADER_BYTES);
  return region.byteLength >= REGION_HEADER_BYTES && Buffer.from(region.buffer, region.byteOffset, expected.length).equals(expected);
}
