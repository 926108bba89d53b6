import assert from 'node:assert/strict';
import fc from 'fast-check';
import { allowedAnswers, specOf } from './model.js';
import type { DeploymentRef, ModelState, VersionRef } from './model.js';
import { FILES } from './system.js';
import type { RealSystem } from './system.js';

/**
 * The operations and faults of the model-based test of the control plane: each changes the real
 * cluster and the reference model alike, then waits for the cluster to settle and probes every
 * door for which model and version answers (RealSystem.probe). `toString` is what a failure
 * prints in the shrunk sequence.
 */

type Command = fc.AsyncCommand<ModelState, RealSystem>;

/** Names the deployments commands act on: two plain-or-split ones, the graph's choices among them. */
const NAMES = ['d0', 'd1'] as const;

abstract class Step implements Command {
  check(_m: Readonly<ModelState>): boolean {
    return true;
  }
  abstract act(m: ModelState, r: RealSystem): Promise<void>;
  abstract toString(): string;
  /** The deployment this command changes while callers call it (a change under load), if any. */
  underLoad(_m: Readonly<ModelState>): string | undefined {
    return undefined;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    r.steps.push(this.toString());
    const target = this.underLoad(m);
    // Callers keep calling through the change: none may fail, and each answer must come from a
    // model the reference allows before or after it (version -> file).
    const before = target === undefined ? [] : answerPairs(m, target);
    const load = target === undefined ? undefined : r.load(target);
    try {
      await this.act(m, r);
      await r.settle(m);
    } finally {
      await load?.stop();
    }
    if (load && target !== undefined) {
      assert.deepEqual(
        load.failures.slice(0, 5),
        [],
        `${this.toString()}: ${load.failures.length} of ${load.sent()} calls under load failed`,
      );
      const allowed = new Set([...before, ...answerPairs(m, target)]);
      for (const p of load.seen)
        assert.ok(
          allowed.has(`${p.version === undefined || p.version === '' ? '1' : p.version}=${p.model}`),
          `${this.toString()}: an answer under load named version '${p.version}' and came from ${p.model}; allowed ${[...allowed].join(', ')}`,
        );
    }
    await r.probe(m, `after ${this.toString()}`);
  }
}

/** What may answer `name` now, as 'version=file' pairs (none if it is not deployed). */
function answerPairs(m: Readonly<ModelState>, name: string): string[] {
  if (!m.deployments.has(name.split(':')[0]!)) return [];
  return [...allowedAnswers(m as ModelState, name)].map(([v, f]) => `${v}=${f}`);
}

/** A plain or split deployment that exists: what a change under load targets. */
function loadable(m: Readonly<ModelState>, name: string): string | undefined {
  const kind = m.deployments.get(name)?.kind;
  return kind === 'plain' || kind === 'split' ? name : undefined;
}

class DeployPlain extends Step {
  constructor(
    readonly name: string,
    readonly file: string,
  ) {
    super();
  }
  override underLoad(m: Readonly<ModelState>): string | undefined {
    // Another model under the same name surges: the old replicas serve until the new ones are READY.
    return loadable(m, this.name);
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const d: DeploymentRef = { kind: 'plain', file: this.file };
    await r.ok('PUT', `/api/v1/deployments/${this.name}`, specOf(d));
    m.deployments.set(this.name, d);
  }
  toString(): string {
    return `deploy ${this.name} = ${this.file}`;
  }
}

class DeploySplit extends Step {
  constructor(
    readonly name: string,
    readonly versions: VersionRef[],
  ) {
    super();
  }
  override underLoad(m: Readonly<ModelState>): string | undefined {
    return loadable(m, this.name);
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const d: DeploymentRef = { kind: 'split', versions: this.versions };
    await r.ok('PUT', `/api/v1/deployments/${this.name}`, specOf(d));
    m.deployments.set(this.name, d);
  }
  toString(): string {
    return `deploy ${this.name} = split ${this.versions.map((v) => `${v.version}:${v.file}@${v.weight}`).join(' ')}`;
  }
}

/** New weights for the versions a split deployment has. */
class Reweight extends Step {
  constructor(
    readonly name: string,
    readonly weights: number[],
  ) {
    super();
  }
  override check(m: Readonly<ModelState>): boolean {
    return m.deployments.get(this.name)?.kind === 'split';
  }
  override underLoad(m: Readonly<ModelState>): string | undefined {
    return loadable(m, this.name);
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const d = m.deployments.get(this.name) as Extract<DeploymentRef, { kind: 'split' }>;
    const next: DeploymentRef = {
      kind: 'split',
      versions: spread(
        d.versions.map((v) => v.version),
        this.weights,
        d.versions,
      ),
    };
    await r.ok('PUT', `/api/v1/deployments/${this.name}`, specOf(next));
    m.deployments.set(this.name, next);
  }
  toString(): string {
    return `reweight ${this.name} ${this.weights.join('/')}`;
  }
}

class Promote extends Step {
  constructor(
    readonly name: string,
    readonly pick: number,
  ) {
    super();
  }
  override check(m: Readonly<ModelState>): boolean {
    return m.deployments.get(this.name)?.kind === 'split';
  }
  override underLoad(m: Readonly<ModelState>): string | undefined {
    return loadable(m, this.name);
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const d = m.deployments.get(this.name) as Extract<DeploymentRef, { kind: 'split' }>;
    const kept = d.versions[this.pick % d.versions.length]!;
    await r.ok('POST', `/api/v1/deployments/${this.name}/promote`, { version: kept.version });
    const promotedFrom = d.versions.length === 1 ? d.promotedFrom : d.versions;
    m.deployments.set(this.name, { kind: 'split', versions: [{ ...kept, weight: 100 }], promotedFrom });
  }
  toString(): string {
    return `promote ${this.name} version #${this.pick}`;
  }
}

class Rollback extends Step {
  constructor(readonly name: string) {
    super();
  }
  override check(m: Readonly<ModelState>): boolean {
    return m.deployments.get(this.name)?.kind === 'split';
  }
  override underLoad(m: Readonly<ModelState>): string | undefined {
    return loadable(m, this.name);
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const d = m.deployments.get(this.name) as Extract<DeploymentRef, { kind: 'split' }>;
    const answer = await r.request('POST', `/api/v1/deployments/${this.name}/rollback`);
    if (d.promotedFrom) {
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      m.deployments.set(this.name, { kind: 'split', versions: d.promotedFrom });
    } else if (d.versions.length > 1) {
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      m.deployments.set(this.name, { kind: 'split', versions: [{ ...d.versions[0]!, weight: 100 }] });
    } else {
      // Nothing to undo: refused saying so, and nothing changes.
      assert.equal(answer.status, 400, JSON.stringify(answer.body));
      assert.match(String(answer.body.error), /nothing to roll back/);
    }
  }
  toString(): string {
    return `rollback ${this.name}`;
  }
}

class Delete extends Step {
  constructor(readonly name: string) {
    super();
  }
  override check(m: Readonly<ModelState>): boolean {
    return m.deployments.has(this.name) && m.graph?.over !== this.name;
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    await r.ok('DELETE', `/api/v1/deployments/${this.name}`);
    m.deployments.delete(this.name);
  }
  toString(): string {
    return `delete ${this.name}`;
  }
}

/** `z`, autoscaled from zero replicas: the probe's first call starts one. */
class DeployZero extends Step {
  constructor(readonly file: string) {
    super();
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const d: DeploymentRef = { kind: 'zero', file: this.file };
    await r.ok('PUT', '/api/v1/deployments/z', specOf(d));
    m.deployments.set('z', d);
  }
  toString(): string {
    return `deploy z = ${this.file}, from zero replicas`;
  }
}

/** A member added to the multiplexed `mx` (deployed with its first member). */
class AddMember extends Step {
  constructor(
    readonly member: string,
    readonly file: string,
  ) {
    super();
  }
  override check(m: Readonly<ModelState>): boolean {
    const d = m.deployments.get('mx');
    return !d || (d.kind === 'mux' && !(this.member in d.members));
  }
  /** A member already in the set keeps answering while another is added. */
  override underLoad(m: Readonly<ModelState>): string | undefined {
    const d = m.deployments.get('mx');
    const first = d?.kind === 'mux' ? Object.keys(d.members)[0] : undefined;
    return first === undefined ? undefined : `mx:${first}`;
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    await r.addMember(this.member, this.file);
    const d = m.deployments.get('mx');
    if (d?.kind === 'mux') d.members[this.member] = this.file;
    else {
      const mux: DeploymentRef = { kind: 'mux', members: { [this.member]: this.file } };
      await r.ok('PUT', '/api/v1/deployments/mx', specOf(mux));
      m.deployments.set('mx', mux);
    }
  }
  toString(): string {
    return `add member ${this.member} = ${this.file} to mx`;
  }
}

/** The graph `g`: one model step, deployment `over`. */
class DeployGraph extends Step {
  constructor(readonly over: string) {
    super();
  }
  override check(m: Readonly<ModelState>): boolean {
    const d = m.deployments.get(this.over);
    return d?.kind === 'plain' || d?.kind === 'split';
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const doc = {
      graph: 'g',
      nodes: [
        { kind: 'model', name: this.over },
        { kind: 'pipeline', name: 'g', steps: [this.over] },
      ],
    };
    await r.ok('PUT', '/api/v1/deployments/g', doc);
    m.graph = { over: this.over };
  }
  toString(): string {
    return `graph g over ${this.over}`;
  }
}

/** `ctr` restarts from its constructor: its total is gone, and the client that saw it is told on its next call. */
function loseCounterState(m: ModelState): void {
  m.counter!.total = 0;
  m.counter!.lostUnseen = true;
}

/** The class actor `ctr` (created on first use) adds `n` to its total. */
class CounterAdd extends Step {
  constructor(readonly n: number) {
    super();
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    if (!m.counter) {
      await r.client.actor({ name: 'ctr', module: 'test/fixtures/classes.js', export: 'Counter', args: [0], cpus: 0.1 });
      m.counter = { total: 0, checkpointed: false };
    }
    const total = await r.counterCall(m, 'add', this.n);
    m.counter.total += this.n;
    m.counter.checkpointed = true;
    assert.equal(total, m.counter.total, 'the total add answered');
  }
  toString(): string {
    return `ctr.add(${this.n})`;
  }
}

class HeadRestart extends Step {
  constructor(readonly signal: 'SIGKILL' | 'SIGTERM') {
    super();
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    await r.restartHead(this.signal);
    // Checkpoints live in the head's memory: the instance (which survives) keeps its state, but
    // a crash before its next call would start it from its constructor.
    if (m.counter) m.counter.checkpointed = false;
  }
  toString(): string {
    return `head ${this.signal} and restart`;
  }
}

class AgentRestart extends Step {
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const node = await r.counterNode();
    const doomed = [...(await r.actorPids('n2')).values()];
    await r.restartAgent();
    await r.gone(doomed);
    // Its actors ended with it: the class instance, if it ran there, restarts from its checkpoint, or from scratch.
    if (m.counter && node === 'n2' && !m.counter.checkpointed) loseCounterState(m);
  }
  toString(): string {
    return 'agent n2 kill -9 and rejoin';
  }
}

class ActorKill extends Step {
  constructor(readonly pick: number) {
    super();
  }
  async act(m: ModelState, r: RealSystem): Promise<void> {
    const pids = [...(await r.actorPids())].sort(([a], [b]) => a.localeCompare(b));
    if (pids.length === 0) return;
    const [name, pid] = pids[this.pick % pids.length]!;
    process.kill(pid, 'SIGKILL');
    await r.gone([pid]);
    if (m.counter && name.startsWith('ctr#') && !m.counter.checkpointed) loseCounterState(m);
  }
  toString(): string {
    return `kill -9 actor #${this.pick}`;
  }
}

/** `n` weights summing to 100 from `raw` (at least one above 0), for `versions` named as given. */
function spread(names: readonly string[], raw: readonly number[], files: readonly VersionRef[]): VersionRef[] {
  const w = names.map((_, i) => raw[i % raw.length]!);
  const sum = w.reduce((a, b) => a + b, 0) || 1;
  const weights = w.map((x) => Math.floor((x * 100) / sum));
  weights[weights.findIndex((x, i) => x > 0 || i === weights.length - 1)]! += 100 - weights.reduce((a, b) => a + b, 0);
  return names.map((version, i) => ({ version, file: files[i]!.file, weight: weights[i]! }));
}

const name = fc.constantFrom(...NAMES);
const file = fc.constantFrom(...FILES);
const versions = fc
  .tuple(
    fc.integer({ min: 1, max: 3 }),
    fc.array(fc.integer({ min: 0, max: 10 }), { minLength: 3, maxLength: 3 }),
    fc.array(file, { minLength: 3, maxLength: 3 }),
  )
  .map(([n, raw, files]) => {
    const named = ['v1', 'v2', 'v3'].slice(0, n);
    return spread(
      named,
      raw,
      files.map((f) => ({ version: '', file: f, weight: 0 })),
    );
  });

/** Every command, with arbitraries for its arguments. */
export const COMMANDS: fc.Arbitrary<Command>[] = [
  fc.tuple(name, file).map(([n, f]) => new DeployPlain(n, f)),
  fc.tuple(name, versions).map(([n, v]) => new DeploySplit(n, v)),
  fc.tuple(name, fc.array(fc.integer({ min: 0, max: 10 }), { minLength: 3, maxLength: 3 })).map(([n, w]) => new Reweight(n, w)),
  fc.tuple(name, fc.nat(2)).map(([n, p]) => new Promote(n, p)),
  name.map((n) => new Rollback(n)),
  name.map((n) => new Delete(n)),
  file.map((f) => new DeployZero(f)),
  fc.tuple(fc.constantFrom('m0', 'm1', 'm2'), file).map(([mm, f]) => new AddMember(mm, f)),
  name.map((n) => new DeployGraph(n)),
  fc.integer({ min: 1, max: 9 }).map((n) => new CounterAdd(n)),
  fc.constantFrom('SIGKILL' as const, 'SIGTERM' as const).map((s) => new HeadRestart(s)),
  fc.constant(new AgentRestart()),
  fc.nat(20).map((p) => new ActorKill(p)),
];
