import {
  ACTOR_ID_HEADER,
  ACTOR_SECRET_HEADER,
  Channel,
  DEFAULT_MAX_FRAME_BYTES,
  HEAD_SHUTTING_DOWN,
  HeadToActorSchema,
  Reconnect,
  openFrameTransport,
  toWireError,
} from '../runtime/internal.js';
import type { ActorToHead, HeadToActor, Logger, TroupeError } from '../runtime/internal.js';
import { openThroughAgent } from './agent-relayed-head.js';

type HeadChannel = Channel<HeadToActor, ActorToHead>;

export interface HeadSocketOptions {
  headUrl: string;
  /** `agent`: the link goes through the agent (actors/agent-relayed-head.ts) instead of a connection of its own. */
  link?: 'direct' | 'agent' | undefined;
  /** The CA a `wss:` head's certificate is verified with (default: Node's roots). */
  ca?: string | undefined;
  actorId: string;
  secret: string;
  log: Logger;
  /** Called on every connection, the first and each reconnection: say `ready` (or `loadFailed`) here. */
  onOpen: (channel: HeadChannel) => void;
  /**
   * A call; answer it on the channel it came on (a reply sent on a closed one is dropped, and the
   * head has retried the call elsewhere). `release` frees the pooled frame its tensors are views of.
   */
  onMessage: (message: HeadToActor, channel: HeadChannel, release: (() => void) | undefined) => void;
  /** The head refused this actor's id and secret: it was replaced or removed, and this process is not wanted. */
  onRefused: (why: string) => void;
}

const HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * An actor's data-plane connection to the head, kept up for the life of the process. An actor does
 * not exit when it loses the head: a restarted head (or one whose connection dropped) takes it back
 * when it reconnects with its id and secret and says `ready` again, so its model is not reloaded.
 * Reconnects back off as every process's do (runtime's Reconnect), with jitter so a node's actors do not arrive in step.
 * Only a refusal (401: the head no longer knows this id and secret) ends the process; a head
 * that is down is waited for, bounded by the agent, whose exit (IPC) still ends every actor.
 */
export class HeadSocket {
  readonly #options: HeadSocketOptions;
  #channel: HeadChannel | undefined;
  readonly #reconnect = new Reconnect(() => this.#connect(), { keepsProcessAlive: true });
  #stopped = false;
  #connectedOnce = false;

  constructor(options: HeadSocketOptions) {
    this.#options = options;
  }

  /** The open channel, if connected now. */
  get channel(): HeadChannel | undefined {
    return this.#channel && !this.#channel.closed ? this.#channel : undefined;
  }

  start(): void {
    this.#connect();
  }

  /** Sends on the current connection; dropped while disconnected (only for messages that may be lost, e.g. stats). */
  send(message: ActorToHead): void {
    this.channel?.send(message);
  }

  /** Stops reconnecting and closes the connection after what was sent has left; bounded by `timeoutMs`. */
  async close(timeoutMs = 1000): Promise<void> {
    this.#stopped = true;
    this.#reconnect.stop();
    const channel = this.channel;
    if (!channel) return;
    channel.close(1000, 'actor stopping');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([channel.whenClosed, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  #connect(): void {
    if (this.#stopped) return;
    const { headUrl, actorId, secret, log } = this.#options;
    const headers = { [ACTOR_ID_HEADER]: actorId, [ACTOR_SECRET_HEADER]: secret };
    // Calls arrive in pooled frames, released once they have run (see actors/host.ts).
    const options = { maxFrameBytes: DEFAULT_MAX_FRAME_BYTES, pooled: true, timeoutMs: HANDSHAKE_TIMEOUT_MS };
    const opened =
      this.#options.link === 'agent'
        ? openThroughAgent(HANDSHAKE_TIMEOUT_MS)
        : openFrameTransport(new URL('/v1/actor', headUrl), headers, {
            ...options,
            ...(this.#options.ca !== undefined ? { tls: { ca: this.#options.ca } } : {}),
          });
    opened.then(
      (transport) => {
        if (this.#stopped) return transport.terminate();
        if (this.#connectedOnce) log.info({ actor: actorId }, 'reconnected to the head');
        this.#connectedOnce = true;
        this.#reconnect.succeeded();
        const channel: HeadChannel = new Channel<HeadToActor, ActorToHead>(transport, {
          schema: HeadToActorSchema,
          onMessage: (message, release) => this.#options.onMessage(message, channel, release),
          onClose: (code, reason) => {
            if (this.#channel === channel) this.#channel = undefined;
            this.#retry(`connection closed (${code}${reason ? `: ${reason}` : ''})`, code === 1000 || reason === HEAD_SHUTTING_DOWN);
          },
        });
        this.#channel = channel;
        this.#options.onOpen(channel);
      },
      (err: TroupeError) => {
        if (err.code !== 'TROUPE_ERR_UNAUTHORIZED') return this.#retry(err.message);
        this.#stopped = true;
        this.#options.onRefused(err.message);
      },
    );
  }

  #retry(why: string, closedByHead = false): void {
    if (this.#stopped) return;
    // One warning per outage; the attempts after it are debug lines. A connection the head closed
    // itself (a stop, a restart: npm start's Ctrl-C) is news, not a warning: the agent warns of a
    // head it lost, and this actor's own warning is for links that broke (errors, resets).
    const level = this.#reconnect.firstOfOutage ? (closedByHead ? 'info' : 'warn') : 'debug';
    const delay = this.#reconnect.schedule();
    this.#options.log[level]({ actor: this.#options.actorId, why, retryInMs: delay }, 'lost the head; reconnecting');
  }
}

export interface JoinHeadOptions {
  env: {
    TROUPE_HEAD_URL: string;
    TROUPE_ACTOR_ID: string;
    TROUPE_ACTOR_SECRET: string;
    TROUPE_HEAD_LINK?: 'direct' | 'agent' | undefined;
    TROUPE_HEAD_CA?: string | undefined;
  };
  log: Logger;
  /** Exit codes the agent reads: refused by the head, or failed to load. */
  exitCodes: { UNWANTED: number; LOAD_FAILED: number };
  /** On each connection: the `ready` message to send, or the error that kept the actor from loading. */
  readiness: () => Extract<ActorToHead, { type: 'ready' }> | TroupeError;
  onMessage: HeadSocketOptions['onMessage'];
}

/**
 * The head connection every kind of actor keeps: it says `ready` on each connection (a restarted
 * head adopts the actor that way), or `loadFailed` and exits when loading failed; it exits when
 * the head refuses its id and secret.
 */
export function joinHead(options: JoinHeadOptions): HeadSocket {
  const { env, log, exitCodes } = options;
  const head = new HeadSocket({
    headUrl: env.TROUPE_HEAD_URL,
    link: env.TROUPE_HEAD_LINK,
    ca: env.TROUPE_HEAD_CA,
    actorId: env.TROUPE_ACTOR_ID,
    secret: env.TROUPE_ACTOR_SECRET,
    log,
    onRefused: (why) => {
      log.warn({ actor: env.TROUPE_ACTOR_ID, why }, 'the head does not want this actor any more; exiting');
      process.exit(exitCodes.UNWANTED);
    },
    onOpen: (channel) => {
      const ready = options.readiness();
      if (!('type' in ready)) {
        channel.send({ type: 'loadFailed', error: toWireError(ready) });
        process.stderr.write(`${ready.message}\n`);
        // Give the frame a moment to leave before exiting.
        setTimeout(() => process.exit(exitCodes.LOAD_FAILED), 200);
        return;
      }
      channel.send(ready);
    },
    onMessage: options.onMessage,
  });
  head.start();
  return head;
}
