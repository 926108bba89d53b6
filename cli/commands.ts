import type { z } from 'zod';
import { AGENT_FLAGS, AGENT_HELP, AgentFlagsSchema, agentCommand } from './agent.js';
import { DELETE_ARGS, DELETE_FLAGS, DELETE_HELP, DeleteFlagsSchema, deleteCommand } from './delete.js';
import { DEPLOY_ARGS, DEPLOY_FLAGS, DEPLOY_HELP, DeployFlagsObject, deployCommand } from './deploy.js';
import type { ArgDef, FlagDef } from './flags.js';
import { HEAD_FLAGS, HEAD_HELP, HeadFlagsSchema, headCommand } from './head.js';
import { INFER_ARGS, INFER_FLAGS, INFER_HELP, InferFlagsSchema, inferCommand } from './infer.js';
import {
  PROMOTE_ARGS,
  PROMOTE_HELP,
  ROLLBACK_ARGS,
  ROLLBACK_HELP,
  ROLLOUT_FLAGS,
  RolloutFlagsSchema,
  promoteCommand,
  rollbackCommand,
} from './rollout.js';
import { STATUS_FLAGS, STATUS_HELP, StatusFlagsSchema, statusCommand } from './status.js';
import { TUNE_ARGS, TUNE_FLAGS, TUNE_HELP, TuneFlagsSchema, tuneCommand } from './tune.js';
import { UP_FLAGS, UP_HELP, UpFlagsSchema, upCommand } from './up.js';

export interface Command {
  name: string;
  summary: string;
  args: readonly ArgDef[];
  flags: readonly FlagDef[];
  help: string;
  /** The flags' schema (camelCase keys): a test checks it names exactly the flags above. */
  schema: z.ZodObject;
  run(argv: string[]): Promise<void>;
}

/** Every command, in the order `troupe --help` and docs/cli.md list them. */
export const COMMANDS: readonly Command[] = [
  {
    name: 'up',
    summary: 'start an embedded cluster (head + local agent) with an example model',
    args: [],
    flags: UP_FLAGS,
    help: UP_HELP,
    schema: UpFlagsSchema,
    run: upCommand,
  },
  {
    name: 'head',
    summary: 'run the head: scheduler, HTTP API, connection endpoints',
    args: [],
    flags: HEAD_FLAGS,
    help: HEAD_HELP,
    schema: HeadFlagsSchema,
    run: headCommand,
  },
  {
    name: 'agent',
    summary: 'run a node agent that starts model actors for a head',
    args: [],
    flags: AGENT_FLAGS,
    help: AGENT_HELP,
    schema: AgentFlagsSchema,
    run: agentCommand,
  },
  {
    name: 'deploy',
    summary: 'create or update a deployment or a graph from a JSON or YAML file (HTTP API)',
    args: DEPLOY_ARGS,
    flags: DEPLOY_FLAGS,
    help: DEPLOY_HELP,
    schema: DeployFlagsObject,
    run: deployCommand,
  },
  {
    name: 'delete',
    summary: 'remove a graph or a deployment (HTTP API)',
    args: DELETE_ARGS,
    flags: DELETE_FLAGS,
    help: DELETE_HELP,
    schema: DeleteFlagsSchema,
    run: deleteCommand,
  },
  {
    name: 'promote',
    summary: 'send every call of a split deployment to one version (HTTP API)',
    args: PROMOTE_ARGS,
    flags: ROLLOUT_FLAGS,
    help: PROMOTE_HELP,
    schema: RolloutFlagsSchema,
    run: promoteCommand,
  },
  {
    name: 'rollback',
    summary: 'roll a split deployment back: the split before its promotion, or its first version (HTTP API)',
    args: ROLLBACK_ARGS,
    flags: ROLLOUT_FLAGS,
    help: ROLLBACK_HELP,
    schema: RolloutFlagsSchema,
    run: rollbackCommand,
  },
  {
    name: 'infer',
    summary: 'run a deployment or a graph once on a JSON request (HTTP API)',
    args: INFER_ARGS,
    flags: INFER_FLAGS,
    help: INFER_HELP,
    schema: InferFlagsSchema,
    run: inferCommand,
  },
  {
    name: 'status',
    summary: 'show nodes, deployments and actors, and graphs (HTTP API)',
    args: [],
    flags: STATUS_FLAGS,
    help: STATUS_HELP,
    schema: StatusFlagsSchema,
    run: statusCommand,
  },
  {
    name: 'tune',
    summary: 'deploy a model in a sweep of layouts, load each, and print the fastest and its spec',
    args: TUNE_ARGS,
    flags: TUNE_FLAGS,
    help: TUNE_HELP,
    schema: TuneFlagsSchema,
    run: tuneCommand,
  },
];
