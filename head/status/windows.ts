import { z } from 'zod';
import { inFlightOf } from '../state/records.js';
import type { ActorRecord, NodeRecord } from '../state/records.js';
import type { ActorQuery, ActorSort, ActorStateName, NodeQuery, StatusViewRequest } from './client/protocol.js';
import type { StatusFrame } from './frame.js';

/** Rows a page may ask for at once: a screenful or a few, never the cluster. */
export const MAX_WINDOW_ROWS = 200;

const ACTOR_STATES = ['PENDING', 'STARTING', 'READY', 'DRAINING', 'RESTARTING', 'DEAD'] as const;
const offset = z.number().int().min(0).max(10_000_000);
const limit = z.number().int().min(1).max(MAX_WINDOW_ROWS);
const text = z.string().max(200);

export const NodeQuerySchema = z.object({
  offset,
  limit,
  sort: z.enum(['name', 'state', 'actors', 'cpus']),
  descending: z.boolean(),
  text,
  state: z.enum(['all', 'ALIVE', 'SUSPECT', 'DEAD']),
}) satisfies z.ZodType<NodeQuery>;

export const ActorQuerySchema = z.object({
  offset,
  limit,
  group: z.enum(['none', 'deployment', 'node', 'state']),
  sort: z.enum([
    'name',
    'deployment',
    'state',
    'node',
    'device',
    'pid',
    'restarts',
    'queued',
    'inFlight',
    'calls',
    'stateBytes',
    'lastError',
  ]),
  descending: z.boolean(),
  text,
  state: z.enum(['all', 'problems', ...ACTOR_STATES]),
  deployment: text,
  node: text,
}) satisfies z.ZodType<ActorQuery>;

export const ViewRequestSchema = z.object({
  viewer: z.string().min(1).max(100),
  seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  nodes: NodeQuerySchema,
  actors: ActorQuerySchema,
}) satisfies z.ZodType<StatusViewRequest>;

export { DEFAULT_ACTOR_QUERY, DEFAULT_NODE_QUERY } from './client/protocol.js';

/** A cut of a sorted, filtered list: the window's records, and how many matched in all. */
export interface Cut<T> {
  total: number;
  offset: number;
  records: T[];
  groups?: { key: string; count: number }[];
}

const collator = new Intl.Collator('en', { numeric: true });
const NODE_STATE_ORDER: Record<NodeRecord['state'], number> = { ALIVE: 0, SUSPECT: 1, DEAD: 2 };
/** States that need a look first when sorting by state. */
const ACTOR_STATE_ORDER: Record<ActorStateName, number> = { DEAD: 0, RESTARTING: 1, PENDING: 2, STARTING: 3, DRAINING: 4, READY: 5 };

/** The window's offset, moved back onto the last page when the list shrank under it. */
function clampOffset(offset: number, limit: number, total: number): number {
  if (offset < total) return offset;
  return total === 0 ? 0 : Math.floor((total - 1) / limit) * limit;
}

export function nodeWindow(frame: StatusFrame, q: NodeQuery): Cut<NodeRecord> {
  const needle = q.text.trim().toLowerCase();
  const shown = frame.nodes.filter(
    (n) =>
      (q.state === 'all' || n.state === q.state) && (needle === '' || `${n.name} ${n.address} ${n.state}`.toLowerCase().includes(needle)),
  );
  const key = (n: NodeRecord): number =>
    q.sort === 'state'
      ? NODE_STATE_ORDER[n.state]
      : q.sort === 'actors'
        ? frame.placedOn(n.id).length
        : q.sort === 'cpus'
          ? n.resources.cpus
          : 0;
  const dir = q.descending ? -1 : 1;
  shown.sort(
    (a, b) => (q.sort === 'name' ? 0 : (key(a) - key(b)) * dir) || collator.compare(a.name, b.name) * (q.sort === 'name' ? dir : 1),
  );
  const start = clampOffset(q.offset, q.limit, shown.length);
  return { total: shown.length, offset: start, records: shown.slice(start, start + q.limit) };
}

/** An actor's sort and filter keys, from its record: rows are built only for the window. */
interface ActorKeys {
  a: ActorRecord;
  node: string;
  lastError: { time: number; message: string } | null;
}

function sortKey(k: ActorKeys, sort: ActorSort): string | number {
  const a = k.a;
  switch (sort) {
    case 'name':
      return a.name;
    case 'deployment':
      return a.deployment;
    case 'state':
      return ACTOR_STATE_ORDER[a.state];
    case 'node':
      return k.node;
    case 'device':
      return a.device;
    case 'pid':
      return a.pid ?? -1;
    case 'restarts':
      return a.restarts;
    case 'queued':
      return a.stats?.queued ?? 0;
    case 'inFlight':
      return inFlightOf(a);
    case 'calls':
      return a.stats?.calls ?? 0;
    case 'stateBytes':
      return a.stats?.stateBytes ?? -1;
    case 'lastError':
      return k.lastError?.time ?? 0;
  }
}

const compare = (x: string | number, y: string | number): number =>
  typeof x === 'number' && typeof y === 'number' ? x - y : collator.compare(String(x), String(y));

/** What a text filter matches: what the row shows. */
function haystack(k: ActorKeys): string {
  const a = k.a;
  return `${a.name} ${a.deployment} ${a.state} ${a.reason ?? ''} ${k.node} ${a.device} ${a.pid ?? ''} ${k.lastError?.message ?? ''}`.toLowerCase();
}

function groupOf(k: ActorKeys, group: ActorQuery['group']): string {
  return group === 'deployment' ? k.a.deployment : group === 'node' ? k.node : group === 'state' ? k.a.state : '';
}

export function actorWindow(frame: StatusFrame, q: ActorQuery): Cut<ActorRecord> {
  const needle = q.text.trim().toLowerCase();
  const shown: ActorKeys[] = [];
  for (const a of frame.actors) {
    if (q.state === 'problems' ? a.state === 'READY' : q.state !== 'all' && a.state !== q.state) continue;
    if (q.deployment !== '' && a.deployment !== q.deployment) continue;
    const k: ActorKeys = { a, node: frame.nodeNameOf(a) ?? '', lastError: frame.lastErrorOf(a) };
    if (q.node !== '' && k.node !== q.node) continue;
    if (needle !== '' && !haystack(k).includes(needle)) continue;
    shown.push(k);
  }
  const dir = q.descending ? -1 : 1;
  const groupCompare = (x: ActorKeys, y: ActorKeys): number =>
    q.group === 'none'
      ? 0
      : q.group === 'state'
        ? ACTOR_STATE_ORDER[x.a.state] - ACTOR_STATE_ORDER[y.a.state]
        : collator.compare(groupOf(x, q.group), groupOf(y, q.group));
  const keyed = shown.map((k) => ({ k, key: sortKey(k, q.sort) }));
  keyed.sort((x, y) => groupCompare(x.k, y.k) || compare(x.key, y.key) * dir || collator.compare(x.k.a.name, y.k.a.name));
  const start = clampOffset(q.offset, q.limit, keyed.length);
  const window = keyed.slice(start, start + q.limit).map((x) => x.k);
  const cut: Cut<ActorRecord> = { total: keyed.length, offset: start, records: window.map((k) => k.a) };
  if (q.group !== 'none') {
    const inWindow = new Set(window.map((k) => groupOf(k, q.group)));
    const counts = new Map<string, number>();
    for (const { k } of keyed) {
      const g = groupOf(k, q.group);
      if (inWindow.has(g)) counts.set(g, (counts.get(g) ?? 0) + 1);
    }
    cut.groups = [...inWindow].map((key) => ({ key, count: counts.get(key) ?? 0 }));
  }
  return cut;
}
