import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { JobStore, jobJson } from '../../head/http/jobs.js';
import type { JobOptions } from '../../head/http/jobs.js';
import { TroupeError } from '../../runtime/internal.js';

/** A job whose work finishes when the test says so. */
function manual(): { work: () => Promise<string>; started: () => boolean; succeed: (text: string) => void; fail: (err: Error) => void } {
  let began = false;
  let resolve!: (text: string) => void;
  let reject!: (err: Error) => void;
  const done = new Promise<string>((res, rej) => ((resolve = res), (reject = rej)));
  return {
    work: () => ((began = true), done),
    started: () => began,
    succeed: (text) => resolve(text),
    fail: (err) => reject(err),
  };
}

/** Lets settled work run its callbacks (a few microtask turns and one macrotask). */
const settle = () => new Promise((r) => setImmediate(r));

function store(options: Partial<JobOptions> = {}) {
  let now = 1_000_000;
  const jobs = new JobStore(options, () => now);
  return { jobs, advance: (ms: number) => (now += ms) };
}

function unknownJob(err: unknown): boolean {
  assert.ok(err instanceof TroupeError);
  assert.equal(err.code, 'TROUPE_ERR_UNKNOWN_JOB');
  return true;
}

describe('async job store', () => {
  test('a job goes QUEUED, RUNNING, SUCCEEDED; its result is kept as given', async () => {
    const { jobs } = store({ concurrency: 1 });
    const first = manual();
    const second = manual();
    const a = jobs.submit('mlp', first.work);
    const b = jobs.submit('mlp', second.work);
    assert.equal(a.state, 'RUNNING');
    assert.equal(b.state, 'QUEUED', 'one run slot: the second waits');
    assert.equal(b.started, null);
    await settle();
    assert.ok(first.started() && !second.started());

    first.succeed('{"outputs":[]}');
    await settle();
    const done = jobs.get(a.id);
    assert.equal(done.view.state, 'SUCCEEDED');
    assert.equal(done.result, '{"outputs":[]}');
    assert.ok(done.view.finished);
    assert.equal(jobs.get(b.id).view.state, 'RUNNING', 'the freed slot goes to the queued job');
    assert.ok(second.started());
    assert.deepEqual(JSON.parse(jobJson(done.view, done.result)).result, { outputs: [] });
  });

  test('a failed run is a FAILED job with the error code and message', async () => {
    const { jobs } = store();
    const m = manual();
    const job = jobs.submit('boom', m.work);
    m.fail(new TroupeError('TROUPE_ERR_FN_FAILED', "fn 'boom' threw"));
    await settle();
    const { view, result } = jobs.get(job.id);
    assert.equal(view.state, 'FAILED');
    assert.deepEqual(view.error, { code: 'TROUPE_ERR_FN_FAILED', message: "fn 'boom' threw" });
    assert.equal(result, null);
    assert.ok(!('result' in JSON.parse(jobJson(view, result))));
  });

  test('cancel: a queued job never runs; a running one is CANCELLED and its outcome dropped, but holds its slot until its work ends', async () => {
    const { jobs } = store({ concurrency: 1 });
    const running = manual();
    const queued = manual();
    const later = manual();
    const a = jobs.submit('g', running.work);
    const b = jobs.submit('g', queued.work);
    assert.equal(jobs.cancel(b.id).state, 'CANCELLED');
    assert.equal(jobs.cancel(a.id).state, 'CANCELLED');
    const c = jobs.submit('g', later.work);
    assert.equal(c.state, 'QUEUED', 'the cancelled run still occupies the cluster');
    running.succeed('"late"');
    await settle();
    assert.equal(jobs.get(a.id).view.state, 'CANCELLED');
    assert.equal(jobs.get(a.id).result, null, 'a cancelled job keeps no result');
    assert.equal(jobs.get(c.id).view.state, 'RUNNING');
    assert.ok(!queued.started(), 'the cancelled queued job never ran');
    assert.equal(jobs.get(b.id).view.started, null);
  });

  test('cancelling a finished job deletes it', async () => {
    const { jobs } = store();
    const m = manual();
    const job = jobs.submit('mlp', m.work);
    m.succeed('1');
    await settle();
    assert.equal(jobs.cancel(job.id).state, 'SUCCEEDED');
    assert.throws(() => jobs.get(job.id), unknownJob);
    assert.equal(jobs.size.bytes, 0);
  });

  test('finished jobs are kept for the TTL, then dropped; unfinished ones never are', async () => {
    const { jobs, advance } = store({ ttlMs: 60_000 });
    const done = manual();
    const slow = manual();
    const a = jobs.submit('mlp', done.work);
    const b = jobs.submit('mlp', slow.work);
    done.succeed('1');
    await settle();
    advance(59_999);
    assert.equal(jobs.get(a.id).view.state, 'SUCCEEDED');
    advance(1);
    assert.throws(() => jobs.get(a.id), unknownJob);
    advance(10 * 60_000);
    assert.equal(jobs.get(b.id).view.state, 'RUNNING', 'a running job outlives any TTL');
  });

  test('at most maxJobs finished jobs and maxBytes of results: the oldest finished go first', async () => {
    const { jobs } = store({ maxJobs: 2, maxBytes: 10 });
    const ids: string[] = [];
    for (const text of ['"aa"', '"bb"', '"cc"']) {
      const m = manual();
      ids.push(jobs.submit('mlp', m.work).id);
      m.succeed(text);
      await settle();
    }
    assert.throws(() => jobs.get(ids[0]!), unknownJob);
    assert.deepEqual([jobs.get(ids[1]!).result, jobs.get(ids[2]!).result], ['"bb"', '"cc"']);
    assert.deepEqual(jobs.size, { pending: 0, running: 0, finished: 2, bytes: 8 });

    const big = manual();
    const id = jobs.submit('mlp', big.work).id;
    big.succeed('"123456"'); // 8 bytes: fits alone, so both older results go
    await settle();
    assert.equal(jobs.get(id).result, '"123456"');
    assert.throws(() => jobs.get(ids[1]!), unknownJob);
    assert.throws(() => jobs.get(ids[2]!), unknownJob);
  });

  test('a result larger than the whole byte bound fails its job with TROUPE_ERR_RESULT_TOO_LARGE', async () => {
    const { jobs } = store({ maxBytes: 4 });
    const m = manual();
    const job = jobs.submit('mlp', m.work);
    m.succeed('"too long"');
    await settle();
    const { view, result } = jobs.get(job.id);
    assert.equal(view.state, 'FAILED');
    assert.equal(view.error?.code, 'TROUPE_ERR_RESULT_TOO_LARGE');
    assert.match(view.error!.message, /the result is 10 bytes; this head keeps at most 4 bytes/);
    assert.equal(result, null);
  });

  test('past maxPending unfinished jobs, new ones are refused with TROUPE_ERR_OVERLOADED', async () => {
    const { jobs } = store({ maxPending: 2, concurrency: 1 });
    const first = manual();
    jobs.submit('mlp', first.work);
    const queued = jobs.submit('mlp', manual().work);
    assert.throws(
      () => jobs.submit('mlp', manual().work),
      (err: unknown) =>
        err instanceof TroupeError && err.code === 'TROUPE_ERR_OVERLOADED' && /2 jobs are queued or running/.test(err.message),
    );
    jobs.cancel(queued.id);
    assert.equal(jobs.submit('mlp', manual().work).state, 'QUEUED', 'a cancelled job frees its place');
  });

  test('unknown ids get TROUPE_ERR_UNKNOWN_JOB', () => {
    const { jobs } = store();
    assert.throws(() => jobs.get('nope'), unknownJob);
    assert.throws(() => jobs.cancel('nope'), unknownJob);
  });
});
