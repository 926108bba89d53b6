import type { ClientOptions } from 'ws';
import { DEFAULT_MAX_FRAME_BYTES } from '../protocol/codec.js';

/**
 * Options for every WebSocket a Troupe process opens (agents; SDK clients and actors behind a TLS proxy).
 *
 * Client frames carry a zero mask. Masking exists to stop browsers' traffic from poisoning the
 * caches of HTTP proxies; these peers are not browsers, and with a zero mask `ws` skips masking
 * on both ends, which otherwise costs a JavaScript XOR loop and a copy over every tensor byte on
 * each side (a 600 KB image: two passes and a copy per hop). No compression: tensors do not
 * compress well and it would cost a copy per frame.
 */
export function clientSocketOptions(headers: Record<string, string> = {}): ClientOptions {
  return {
    headers,
    maxPayload: DEFAULT_MAX_FRAME_BYTES,
    perMessageDeflate: false,
    generateMask: (mask: Buffer) => void mask.fill(0),
  };
}
