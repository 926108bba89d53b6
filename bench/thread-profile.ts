// Where an actor's CPU goes, by thread, with and without the inference thread: MobileNet, one
// replica x 2 intra-op threads serving HTTP itself (--http-handoff), 16 images in flight for a
// few seconds per mode. Reads each thread's CPU time from /proc/<pid>/task (Linux only), and
// prints per image: the main thread, the inference thread (the worker, when there is one), the
// other threads (onnxruntime's intra-op pool, V8's and libuv's helpers), and the wall time each
// image took, into bench/RESULTS-thread-profile.md. `npm run bench:inference-thread` runs it after
// bench/inference-thread.ts.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { connect } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { whenDoorsOpen } from './lib/doors.js';
import { httpLoad, oipRequest } from './lib/http-load.js';
import { report } from './lib/report.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';

const SECONDS = Number(process.env.SECONDS ?? 6);
/** Each mode is profiled this many times, the modes taking turns: the machine's speed drifts between minutes. */
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const image = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i));

/** CPU ms of every thread of `pid`, with its name (comm), by thread id. */
function threads(pid: number): Map<number, { name: string; ms: number }> {
  const out = new Map<number, { name: string; ms: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), { name, ms: (Number(f[11]) + Number(f[12])) * 10 });
    } catch {
      // The thread ended while we looked.
    }
  }
  return out;
}

const { say, lines } = report();
say("# Where the actor's CPU goes, by thread, with and without the inference thread\n");
say(systemLine('bench:inference-thread', 'bench/thread-profile.ts'));
say(
  `- MobileNet-v2-shaped CNN, 1 replica x 2 intra-op threads, batching 2, serving HTTP itself (--http-handoff), 16 images in flight for ${SECONDS} s per profile; the two modes take turns, ${ROUNDS} rounds; CPU time of each thread from /proc/PID/task; load average at the start ${loadavg()[0]!.toFixed(1)} (anything else running shares the cores)`,
);
say(
  "- per image, in µs: the main thread, the three busiest other threads by name (the inference thread, when there is one, and onnxruntime's intra-op pool thread are among them), the rest together, all threads, and 2 cores x the wall time\n",
);
const modes = Array.from({ length: ROUNDS }, () => ['never', 'auto'] as const).flat();
for (const mode of modes) {
  const cluster = await startCluster({
    agents: [['--name', 'p', '--cpus', '64']],
    headArgs: ['--http-handoff'],
    env: { TROUPE_INFERENCE_THREAD: mode },
  });
  try {
    const client = await connect(cluster.url);
    const view = await client.deploy({ name: 'cnn', model: 'mobilenet.onnx', threads: 2, batch: { maxSize: 2 }, maxQueue: 100_000 });
    await client.close();
    const pid = view.actors[0]!.pid!;
    const request = oipRequest(`${cluster.url}/v2/models/cnn/infer`, 'image', [1, 3, 224, 224], image, 'logits', true);
    await whenDoorsOpen(cluster.url, 'cnn', 1, request);
    await httpLoad(request, 16, 1);
    const before = threads(pid);
    // Warmed up above: the CPU read around this run is this run's alone.
    const load = await httpLoad(request, 16, SECONDS, { warmUp: false });
    const after = threads(pid);
    const perImage = (ms: number) => (ms * 1000) / load.requests;
    const used = [...after].map(([tid, t]) => ({ tid, name: t.name, ms: t.ms - (before.get(tid)?.ms ?? 0) })).filter((t) => t.ms > 0);
    const main = used.find((t) => t.tid === pid)?.ms ?? 0;
    // The inference thread is the worker that took the most CPU besides the main thread, when there is one.
    const others = used.filter((t) => t.tid !== pid).sort((a, b) => b.ms - a.ms);
    const total = used.reduce((a, t) => a + t.ms, 0);
    say(
      `- ${mode === 'never' ? 'before (session on the main thread)' : 'after (session on an inference thread)'}: ${fmt(load.rps, 1)} images/s; µs per image: main thread ${fmt(perImage(main))}, ` +
        `${others
          .slice(0, 3)
          .map((t) => `${t.name} ${fmt(perImage(t.ms))}`)
          .join(
            ', ',
          )}, other threads ${fmt(perImage(others.slice(3).reduce((a, t) => a + t.ms, 0)))}; all ${fmt(perImage(total))} of ${fmt(perImage(load.seconds * 1000 * 2))} (2 cores x the wall time)`,
    );
  } finally {
    await cluster.stop();
  }
}
say(`\nLoad average at the end: ${loadavg()[0]!.toFixed(1)}.`);
writeFileSync(new URL('../../bench/RESULTS-thread-profile.md', import.meta.url), `${lines.join('\n')}\n`);
