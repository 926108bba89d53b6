import { z } from 'zod';

/**
 * Agent <-> actor health messages over the IPC channel of the actor process. `busy`/`idle` mark
 * when the actor enters and leaves inference: onnxruntime blocks the actor's event loop while it
 * runs, so an unanswered ping means "hung" only when the actor is not inside a long inference.
 * They are sent on transitions only (idle -> running, queue drained), not per call.
 */
export const AgentToActorIpcSchema = z.object({ type: z.literal('ping'), seq: z.number().int() });
export type AgentToActorIpc = z.infer<typeof AgentToActorIpcSchema>;

export const ActorToAgentIpcSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('pong'), seq: z.number().int() }),
  z.object({ type: z.literal('busy') }),
  z.object({ type: z.literal('idle') }),
]);
export type ActorToAgentIpc = z.infer<typeof ActorToAgentIpcSchema>;
