import { z } from 'zod';

/**
 * Agent <-> actor health messages over the IPC channel of the actor process. An actor answers a
 * ping between runs; during a long inference it cannot (onnxruntime blocks its event loop), so the
 * agent also watches its CPU time before calling it hung (node-agent/health.ts).
 */
export const AgentToActorIpcSchema = z.object({ type: z.literal('ping'), seq: z.number().int() });
/** A frame over IPC (structured clone: a Buffer arrives as a Uint8Array). */
const IpcFrameSchema = z.custom<Uint8Array>((b) => b instanceof Uint8Array, 'a frame of bytes');
/** The actor numbers each opening of its link; every message about a link names it, so a late one about an older link is dropped. */
const SeqSchema = z.number().int().min(0);

/**
 * An actor whose agent relays its link to the head (runtime/transport/relayed-transport.ts) opens,
 * uses and closes it over the same IPC channel; the agent answers `headOpen` with `headOpened`, or
 * `headClosed` (the agent has no head now, or the link ended: try again) or `headRefused` (the head
 * does not know this actor).
 */
export const RelayToActorIpcSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('headOpened'), seq: SeqSchema }),
  z.object({ type: z.literal('headFrame'), seq: SeqSchema, frame: IpcFrameSchema }),
  z.object({ type: z.literal('headClosed'), seq: SeqSchema, code: z.number().int(), reason: z.string().max(256) }),
  z.object({ type: z.literal('headRefused'), seq: SeqSchema, why: z.string().max(1024) }),
]);
export type RelayToActorIpc = z.infer<typeof RelayToActorIpcSchema>;
export const ActorToRelayIpcSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('headOpen'), seq: SeqSchema }),
  z.object({ type: z.literal('headFrame'), seq: SeqSchema, frame: IpcFrameSchema }),
  z.object({ type: z.literal('headClose'), seq: SeqSchema, code: z.number().int().min(1000).max(4999), reason: z.string().max(256) }),
]);
export type ActorToRelayIpc = z.infer<typeof ActorToRelayIpcSchema>;
export type AgentToActorIpc = z.infer<typeof AgentToActorIpcSchema>;

export const ActorToAgentIpcSchema = z.object({ type: z.literal('pong'), seq: z.number().int() });
export type ActorToAgentIpc = z.infer<typeof ActorToAgentIpcSchema>;

/**
 * Under TLS, a model actor asks its agent for the certificate and key its direct port presents
 * (`directTlsAsk`), and the agent answers over IPC: the key never passes through the actor's
 * environment, arguments or a file.
 */
export const DirectTlsAskSchema = z.object({ type: z.literal('directTlsAsk') });
export const DirectTlsIpcSchema = z.object({
  type: z.literal('directTls'),
  cert: z
    .string()
    .min(1)
    .max(256 * 1024),
  key: z
    .string()
    .min(1)
    .max(256 * 1024),
});
export type DirectTlsIpc = z.infer<typeof DirectTlsIpcSchema>;
