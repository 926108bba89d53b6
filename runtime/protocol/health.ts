import { z } from 'zod';

/**
 * Agent <-> actor health messages over the IPC channel of the actor process. An actor answers a
 * ping between runs; during a long inference it cannot (onnxruntime blocks its event loop), so the
 * agent also watches its CPU time before calling it hung (node-agent/health.ts).
 */
export const AgentToActorIpcSchema = z.object({ type: z.literal('ping'), seq: z.number().int() });
export type AgentToActorIpc = z.infer<typeof AgentToActorIpcSchema>;

export const ActorToAgentIpcSchema = z.object({ type: z.literal('pong'), seq: z.number().int() });
export type ActorToAgentIpc = z.infer<typeof ActorToAgentIpcSchema>;
