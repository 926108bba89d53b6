import type { ConnectionCap } from './connection-cap.js';
import type { FrontDoor } from './front-door.js';
import type { HandoffDoors } from './handoff-doors.js';

/**
 * The head's --max-connections over the connections front-door workers and replicas hold too: it
 * counts them, and at the cap the oldest slow one goes wherever it is, a replica's if it is older
 * than any worker's.
 */
export function capElsewhere(cap: ConnectionCap, workers: FrontDoor, doors: HandoffDoors | undefined): void {
  cap.countElsewhere(
    () => workers.connections + (doors?.connections ?? 0),
    (before) => doors?.evictSlow(Math.min(before, workers.oldestUnproven ?? Infinity)) || workers.evictSlow(before),
  );
}
