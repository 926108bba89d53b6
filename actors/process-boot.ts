import type { z } from 'zod';
import { AgentToActorIpcSchema, onParentGone } from '../runtime/internal.js';
import type { ActorToAgentIpc } from '../runtime/internal.js';

/**
 * Exit codes the agent reads to tell a bad start from a crash, the same for every kind of actor.
 * RESTORE_FAILED: a class actor's restore() threw (the restart that follows tries again).
 * UNWANTED: the head refused this actor's id and secret on a reconnect (it was replaced or removed).
 * THREAD_DIED: a model actor's inference thread died (actors/threaded-model.ts); restarted as a crash.
 */
export const ACTOR_EXIT = { BAD_ENV: 2, LOAD_FAILED: 3, RESTORE_FAILED: 4, UNWANTED: 5, THREAD_DIED: 6, CALL_OVERRAN: 7 } as const;

/** This process's environment as `schema` reads it; a bad one is said on stderr and ends the process (BAD_ENV). */
export function readActorEnv<S extends z.ZodType>(schema: S, who: string): z.output<S> {
  const parsed = schema.safeParse(process.env);
  if (!parsed.success) {
    process.stderr.write(
      `troupe ${who}: bad environment: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}\n`,
    );
    process.exit(ACTOR_EXIT.BAD_ENV);
  }
  return parsed.data;
}

/**
 * An actor lives only as long as its agent: it ends when the agent's IPC channel goes (even by
 * kill -9), and answers the agent's health pings on it meanwhile. `runGoingOn`, for a model on an
 * inference thread: the end of the run going on now, if any. A ping is answered only after it, as
 * a main thread blocked in that run would answer, so the agent's health rules (a run silent past
 * `--max-inference-ms` is hung, see node-agent/health.ts) hold for runs on a thread too.
 */
export function followAgent(runGoingOn?: () => Promise<unknown> | undefined): void {
  onParentGone(() => process.exit(0));
  process.on('message', (raw) => {
    const ping = AgentToActorIpcSchema.safeParse(raw);
    if (!ping.success) return;
    const pong = () => tell({ type: 'pong', seq: ping.data.seq });
    const run = runGoingOn?.();
    if (run) void run.then(pong, pong);
    else pong();
  });
}

/** Health messages to the agent over IPC; dropped when there is no agent (run by hand). */
function tell(message: ActorToAgentIpc): void {
  if (process.connected) process.send?.(message);
}
