import * as z from 'zod';
import { MethodNameSchema } from './protocol/common.js';
import { TroupeError } from './errors.js';

/**
 * Concurrency groups of a class actor (Ray's `concurrency_groups`): named sets of methods, each
 * with its own limit and queue in an instance, so that calls of one group never wait behind
 * another's (a health check beside slow I/O). Methods in no group run in the `default` group,
 * whose limit is the spec's maxConcurrency. Declared in the spec (`concurrencyGroups`) or on the
 * class (`static concurrencyGroups`), the spec winning where both say; a call may name its group.
 */

/** Most calls one class instance runs at once in one group (maxConcurrency). */
export const MAX_CONCURRENCY = 1024;
/** Most named groups an actor may declare. */
export const MAX_CONCURRENCY_GROUPS = 32;
/** The group of the methods no other group names; its limit is maxConcurrency. */
export const DEFAULT_CONCURRENCY_GROUP = 'default';

/** A group's name, as a call names it (`default` included). */
export const ConcurrencyGroupNameSchema = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]{0,62}$/, 'a concurrency group name is 1-63 letters, digits, "_" or "-", starting with a letter');

const GroupSchema = z
  .object({
    /** Calls of this group one instance runs at once. */
    maxConcurrency: z.number().int().min(1).max(MAX_CONCURRENCY),
    /** The methods whose calls run in this group (unless a call names another). */
    methods: z.array(MethodNameSchema).max(1024).optional(),
  })
  .strict();

/** Named groups as a spec or a class declares them: `{ io: { maxConcurrency: 2, methods: ['fetch'] } }`. */
export const ConcurrencyGroupsSchema = z.record(z.string(), GroupSchema).superRefine((groups, ctx) => {
  const names = Object.keys(groups);
  if (names.length > MAX_CONCURRENCY_GROUPS)
    ctx.addIssue({ code: 'custom', message: `at most ${MAX_CONCURRENCY_GROUPS} concurrency groups, got ${names.length}` });
  const owner = new Map<string, string>();
  for (const name of names) {
    const named = ConcurrencyGroupNameSchema.safeParse(name);
    if (!named.success)
      ctx.addIssue({ code: 'custom', path: [name], message: `'${name.slice(0, 80)}': ${named.error.issues[0]?.message}` });
    if (name === DEFAULT_CONCURRENCY_GROUP)
      ctx.addIssue({
        code: 'custom',
        path: [name],
        message: "'default' is the group of the methods no group names; its limit is maxConcurrency, so it is not declared",
      });
    for (const method of groups[name]!.methods ?? []) {
      const other = owner.get(method);
      if (other !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [name, 'methods'],
          message: `method '${method}' is in two concurrency groups ('${other}' and '${name}'): a method runs in one`,
        });
      owner.set(method, name);
    }
  }
});
export type ConcurrencyGroups = z.infer<typeof ConcurrencyGroupsSchema>;

/** The groups an instance runs, `default` among them, each with its limit and methods (what `ready` and describe() say). */
export const GroupTableSchema = z
  .record(
    ConcurrencyGroupNameSchema,
    z.object({ maxConcurrency: z.number().int().min(1).max(MAX_CONCURRENCY), methods: z.array(z.string().max(128)).max(1024) }),
  )
  .refine((t) => Object.keys(t).length <= MAX_CONCURRENCY_GROUPS + 1, `at most ${MAX_CONCURRENCY_GROUPS + 1} groups`);
export type GroupTable = z.infer<typeof GroupTableSchema>;

/** What is wrong with `groups` (the first issue, with where), for an error message. */
export function groupsProblem(error: z.ZodError): string {
  const issue = error.issues[0];
  const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
  return `${where}${issue?.message ?? 'invalid'}`;
}

/**
 * The groups an instance of a class with `methods` runs: the class's own (`fromClass`, its
 * `static concurrencyGroups`) and the spec's (`fromSpec`), the spec winning for a group's limit
 * and a method's group; every other method in `default`, with limit `maxConcurrency`. A group
 * naming a method the class lacks is refused: the spec's with TROUPE_ERR_BAD_SPEC, the class's
 * with TROUPE_ERR_MODEL_LOAD, naming it and the methods there are.
 */
export function groupTable(
  className: string,
  methods: readonly string[],
  maxConcurrency: number,
  fromClass: ConcurrencyGroups = {},
  fromSpec: ConcurrencyGroups = {},
): GroupTable {
  const limits = new Map<string, number>();
  const groupOf = new Map<string, string>();
  for (const [groups, where, code] of [
    [fromClass, `${className}.concurrencyGroups`, 'TROUPE_ERR_MODEL_LOAD'],
    [fromSpec, "the spec's concurrencyGroups", 'TROUPE_ERR_BAD_SPEC'],
  ] as const) {
    for (const [name, group] of Object.entries(groups)) {
      limits.set(name, group.maxConcurrency);
      const stray = (group.methods ?? []).filter((m) => !methods.includes(m));
      if (stray.length > 0)
        throw new TroupeError(
          code,
          `${where}.${name} names no method of class '${className}': ${stray.join(', ')} (its methods: ${methods.join(', ') || 'none'})`,
        );
      for (const method of group.methods ?? []) groupOf.set(method, name);
    }
  }
  const table: GroupTable = { [DEFAULT_CONCURRENCY_GROUP]: { maxConcurrency, methods: [] } };
  for (const [name, limit] of limits) table[name] = { maxConcurrency: limit, methods: [] };
  for (const method of methods) table[groupOf.get(method) ?? DEFAULT_CONCURRENCY_GROUP]!.methods.push(method);
  return table;
}

/** The group a call of `method` runs in: the one it names, else its method's, else `default`. */
export function groupOfCall(table: GroupTable | undefined, method: string, named?: string): string {
  if (named !== undefined) return named;
  for (const [name, group] of Object.entries(table ?? {})) if (group.methods.includes(method)) return name;
  return DEFAULT_CONCURRENCY_GROUP;
}

/**
 * The error for a call naming a group the instance lacks (`table` undefined: it has only `default`).
 * Said by the head before the call is sent, and by the instance for a call that crossed anyway.
 */
export function unknownGroup(
  actor: string,
  method: string,
  table: GroupTable | undefined,
  named: string | undefined,
): TroupeError | undefined {
  const names = Object.keys(table ?? { [DEFAULT_CONCURRENCY_GROUP]: null });
  if (named === undefined || names.includes(named)) return undefined;
  return new TroupeError(
    'TROUPE_ERR_BAD_REQUEST',
    `${actor}.${method}() names concurrency group '${named}', which the actor does not have (its groups: ${names.join(', ')})`,
  );
}

/** One group of an instance as status views show it: its limit, and the calls it runs and holds waiting. */
export interface GroupLoadView {
  name: string;
  limit: number;
  running: number;
  waiting: number;
}

/** Each group of `table` with the load `stats` last reported for it (none reported: idle). */
export function groupLoads(
  table: GroupTable | undefined,
  stats: Readonly<Record<string, { running: number; waiting: number }>> | undefined,
): GroupLoadView[] | undefined {
  if (!table) return undefined;
  return Object.entries(table).map(([name, g]) => ({
    name,
    limit: g.maxConcurrency,
    running: stats?.[name]?.running ?? 0,
    waiting: stats?.[name]?.waiting ?? 0,
  }));
}

/** `io 2/2 +1 waiting, compute 0/1`: the groups' loads on one line. */
export function groupLoadsLine(loads: readonly GroupLoadView[]): string {
  return loads.map((g) => `${g.name} ${g.running}/${g.limit}${g.waiting > 0 ? ` +${g.waiting} waiting` : ''}`).join(', ');
}
