import type { Socket } from 'node:net';
import { HandoffListener, TroupeError, descriptorOf } from '../runtime/internal.js';
import type { ActorToHead, HeadToActor, Logger } from '../runtime/internal.js';
import { SlowConnections } from './slow-connections.js';

/** What the head tells an actor when it opens the handoff: how to serve the connections it hands over. */
export type HandoffSettings = Omit<Extract<HeadToActor, { type: 'handoffOpen' }>, 'type' | 'id'>;

/**
 * Serves a connection the head handed over, after `head`, the bytes it read of it already; returns
 * the socket that carries the connection from then on (a server may move it onto its own).
 */
export type ServeConnection = (socket: Socket, head: Buffer, settings: HandoffSettings) => Socket;

/** Sends a message to the head on the actor's current connection (dropped while there is none). */
type TellHead = (message: ActorToHead) => void;

/**
 * A model actor's HTTP door: client connections the head hands over on this host (runtime/handoff/)
 * are served here, request by request, by the actor itself (`serve`: the inference protocol over
 * the model this actor holds), so a request costs one process instead of a front-door worker and
 * an actor. The actor listens at a random abstract socket address it tells the head in `ready`;
 * the head connects, says `handoffOpen` (only its pid may take the connection), then queues each
 * client connection on it and says `connection` with the bytes it read. A connection whose next
 * request is not this actor's to serve goes back the same way (`giveBack`).
 */
export class HttpDoor {
  /** The abstract socket address the head connects to. */
  readonly name: string;
  readonly #handoff: HandoffListener;
  readonly #serve: ServeConnection;
  readonly #tell: TellHead;
  readonly #log: Logger;
  /** The settings the head gave when it opened the handoff. */
  #settings: HandoffSettings | undefined;
  readonly #open = new Set<Socket>();
  /** Those whose request is still coming: the head's connection cap may close them (slow-connections.ts). */
  readonly slow: SlowConnections;

  private constructor(handoff: HandoffListener, serve: ServeConnection, tell: TellHead, log: Logger) {
    this.#handoff = handoff;
    this.name = handoff.name;
    this.#serve = serve;
    this.#tell = tell;
    this.#log = log;
    this.slow = new SlowConnections((report) => tell({ type: 'slowConnections', ...report }));
  }

  /** A door for this actor, or undefined (logged) when this host cannot hand connections over: connections then stay with the head's workers. */
  static create(actorId: string, serve: ServeConnection, tell: TellHead, log: Logger): HttpDoor | undefined {
    const handoff = HandoffListener.create(`troupe-${actorId}`, log);
    if (typeof handoff === 'string') {
      log.debug({ actor: actorId, why: handoff }, 'no HTTP door: the head serves this actor over its workers');
      return undefined;
    }
    return new HttpDoor(handoff, serve, tell, log);
  }

  /** Takes the head's pending connection (a new head's replaces an old one's). Throws when none is pending, or another process's is. */
  open(settings: HandoffSettings): void {
    if (!this.#handoff.open(settings.headPid))
      throw new TroupeError('TROUPE_ERR_BAD_MESSAGE', 'handoffOpen: the head has not connected to the handoff socket');
    this.#settings = settings;
  }

  /** A connection the head queued: serve it, after `head`. */
  take(head: Buffer): void {
    // Not reading yet: the server takes the handle and reads into its own buffers. The handoff
    // opened (so its settings are here) before the head could queue one.
    const socket = this.#handoff.take();
    const settings = this.#settings;
    if (!socket || !settings) return void socket?.destroy();
    const served = this.#serve(socket, head, settings);
    this.#open.add(served);
    served.once('close', () => {
      this.#open.delete(served);
      this.#tell({ type: 'connectionClosed' });
    });
  }

  /** Sends a connection back to the head with `bytes`, what was read of a request this actor does not serve. */
  giveBack(socket: Socket, bytes: Buffer): void {
    const fd = descriptorOf(socket);
    let sent = false;
    try {
      sent = fd !== undefined && this.#handoff.send(fd);
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'cannot give a connection back to the head');
    }
    if (sent) this.#tell({ type: 'connectionBack', head: bytes });
    // Closing this process's descriptor leaves the connection to the head's (or ends it, unsent).
    socket.destroy();
  }

  /** Ends every connection once its answers are out (the server's gate refuses new requests first). */
  closeAll(): void {
    for (const socket of this.#open) socket.end();
  }
}
