import * as z from 'zod';
import { TensorInfoSchema } from '../protocol/common.js';
import { DeploymentViewSchema, GraphViewSchema } from '../views.js';

/**
 * What deploying a graph answers: the graph (kind 'model' or 'fn' when the document's root is a
 * single step, which then registers no graph), every graph name it made runnable, and the
 * deployments it uses as they are now.
 */
export const GraphDeploymentViewSchema = z.object({
  name: z.string(),
  kind: z.enum(['pipeline', 'ensemble', 'dataParallel', 'model', 'fn', 'method']),
  steps: z.number(),
  inputs: z.array(TensorInfoSchema).nullable(),
  outputs: z.array(TensorInfoSchema).nullable(),
  /** Names now runnable: the graph and each named sub-graph (pipeline, ensemble, dataParallel) in it. */
  graphs: z.array(z.string()),
  deployments: z.array(DeploymentViewSchema),
});
export type GraphDeploymentView = z.infer<typeof GraphDeploymentViewSchema>;

export { GraphViewSchema };
export type { GraphView } from '../views.js';
