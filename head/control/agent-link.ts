import type { AgentToHead, Channel, HeadToAgent, HeadToAgentReplies } from '../../runtime/internal.js';

/** The head's end of an agent's control connection (WebSocket). */
export type AgentChannel = Channel<AgentToHead, HeadToAgent, typeof HeadToAgentReplies>;

/** The order to start one actor's process, as the controller writes it (records.ts startActorMessage). */
export type StartActorOrder = Omit<Extract<HeadToAgent, { type: 'startActor' }>, 'id'>;

/**
 * The controller's port to one node agent's connection: everything it asks a node to do goes
 * through here. Production wraps the agent's WebSocket channel ({@link channelAgentLink}); unit
 * tests hand the controller a fake that answers as a test decides. One link is one connection: a
 * node that reconnects gets a new link, and an answer that comes on an old one is recognised as
 * stale by comparing links.
 */
export interface AgentLink {
  /** False once the connection is gone. */
  readonly closed: boolean;
  /**
   * Starts an actor's process and resolves with its pid once it runs, or rejects with a
   * TroupeError: retryable when the connection or the agent went away (nothing is known of the
   * model), not retryable when the actor could not start (a bad model path, a refused fn).
   */
  startActor(order: StartActorOrder): Promise<{ pid: number }>;
  /**
   * Asks the agent to stop an actor, giving it `graceMs` to finish (SIGTERM, then SIGKILL).
   * Resolves once the agent answered or could not be asked; it never rejects, since a stop that
   * found nothing to stop has done its job.
   */
  stopActor(actorId: string, graceMs: number): Promise<void>;
  /** Drops the connection without a handshake (a node judged dead, or replaced by a newer one). */
  close(): void;
}

/** How long an agent gets to start an actor's process (not to load its model: READY says that). */
export const START_ACTOR_TIMEOUT_MS = 30_000;

/** Time past a stop's grace the agent gets to answer before the head stops waiting. */
const STOP_ANSWER_SLACK_MS = 5000;

/** The production link: requests on the agent's control channel. */
export function channelAgentLink(channel: AgentChannel): AgentLink {
  return {
    get closed() {
      return channel.closed;
    },
    startActor: async (order) => {
      const { pid } = await channel.request(order, START_ACTOR_TIMEOUT_MS);
      return { pid };
    },
    stopActor: (actorId, graceMs) =>
      channel.request({ type: 'stopActor', actorId, graceMs }, graceMs + STOP_ANSWER_SLACK_MS).then(
        () => undefined,
        () => undefined,
      ),
    close: () => channel.terminate(),
  };
}
