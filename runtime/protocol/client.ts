import { z } from 'zod';
import { WireTensorMapSchema } from '../tensor/wire.js';
import { FailSchema, IdSchema, NameSchema, ReplySchema } from './common.js';

/**
 * An output of an earlier run (a future passed as an input): the run's id and, when the run has
 * more than one output, which one.
 */
export const RunRefSchema = z.object({ run: IdSchema, output: z.string().min(1).max(256).optional() });
export type RunRef = z.infer<typeof RunRefSchema>;

/** SDK client -> head. Every message is a request: the head answers with `reply` or `fail`. */
export const ClientToHeadSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('deploy'),
    id: IdSchema,
    spec: z.unknown(),
    /** false: answer at once with the deployment as it is (actors may still be PENDING). */
    wait: z.boolean().optional(),
  }),
  z.object({ type: z.literal('undeploy'), id: IdSchema, name: NameSchema }),
  z.object({
    type: z.literal('run'),
    id: IdSchema,
    deployment: z.string().max(256),
    inputs: WireTensorMapSchema,
    /** Which outputs to return; all when absent. */
    outputs: z.array(z.string().max(256)).max(1024).optional(),
    timeoutMs: z.number().positive().max(24 * 3600 * 1000).optional(),
    /** Inputs that are outputs of earlier runs (futures), resolved on the head: input name -> run. */
    refs: z.record(z.string().min(1).max(256), RunRefSchema).optional(),
    /** Answer with a per-step timing trace beside the outputs. */
    trace: z.boolean().optional(),
  }),
  z.object({ type: z.literal('describe'), id: IdSchema }),
]);
export type ClientToHead = z.infer<typeof ClientToHeadSchema>;

/** head -> SDK client. */
export const HeadToClientSchema = z.discriminatedUnion('type', [ReplySchema, FailSchema]);
export type HeadToClient = z.infer<typeof HeadToClientSchema>;
