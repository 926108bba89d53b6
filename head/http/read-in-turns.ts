import type { Readable } from 'node:stream';

/** What one body may take of one turn of the event loop before it yields to the other sockets. */
export const TURN_BYTES = 256 * 1024;

/**
 * Reads `body` (a request's stream) in turns: once it has delivered `budget` bytes in one turn of
 * the event loop, it is paused until the next, and its socket stops being read meanwhile. libuv
 * reads a readable socket up to 32 times in one turn, so fourteen bodies of 29 MB arriving at once
 * took the head's event loop for tens of milliseconds at a time, and a new connection's GET
 * /healthz waited behind them.
 *
 * `hold(reason)` and `release(reason)` let the caller pause it for reasons of its own (a
 * destination that is full): it resumes when no reason holds it.
 */
export function readInTurns(body: Readable, budget = TURN_BYTES): { hold(reason: string): void; release(reason: string): void } {
  const holds = new Set<string>();
  let taken = 0;
  let turnEnds: NodeJS.Immediate | undefined;
  const hold = (reason: string) => {
    holds.add(reason);
    body.pause();
  };
  const release = (reason: string) => {
    holds.delete(reason);
    if (holds.size === 0 && !body.destroyed) body.resume();
  };
  body.on('data', (chunk: Buffer) => {
    taken += chunk.length;
    if (taken < budget || holds.has('turn')) return;
    hold('turn');
    turnEnds ??= setImmediate(() => {
      turnEnds = undefined;
      taken = 0;
      release('turn');
    });
  });
  body.once('close', () => clearImmediate(turnEnds));
  return { hold, release };
}
