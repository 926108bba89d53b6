// Where an actor's CPU goes, by thread, with and without the inference thread: MobileNet, one
// replica x 2 intra-op threads serving HTTP itself (--http-handoff), 16 images in flight for a
// few seconds per mode. Reads each thread's CPU time from /proc/<pid>/task (Linux only), and
// prints per image: the main thread, the inference thread (the worker, when there is one), the
// other threads (onnxruntime's intra-op pool, V8's and libuv's helpers), and the wall time each
// image took. `npm run build && node dist/bench/thread-profile.js`.
import { readFileSync, readdirSync } from 'node:fs';
import { connect } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { whenDoorsOpen } from './lib/doors.js';
import { httpLoad, oipRequest } from './lib/http-load.js';
import { fmt } from './lib/table.js';

const SECONDS = Number(process.env.SECONDS ?? 6);
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

for (const mode of ['never', 'auto'] as const) {
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
    const load = await httpLoad(request, 16, SECONDS);
    const after = threads(pid);
    const perImage = (ms: number) => (ms * 1000) / load.requests;
    const used = [...after].map(([tid, t]) => ({ tid, name: t.name, ms: t.ms - (before.get(tid)?.ms ?? 0) })).filter((t) => t.ms > 0);
    const main = used.find((t) => t.tid === pid)?.ms ?? 0;
    // The inference thread is the worker that took the most CPU besides the main thread, when there is one.
    const others = used.filter((t) => t.tid !== pid).sort((a, b) => b.ms - a.ms);
    const total = used.reduce((a, t) => a + t.ms, 0);
    process.stdout.write(
      `- ${mode === 'never' ? 'before (session on the main thread)' : 'after (session on an inference thread)'}: ${fmt(load.rps, 1)} images/s; µs per image: main thread ${fmt(perImage(main))}, ` +
        `${others
          .slice(0, 3)
          .map((t) => `${t.name} ${fmt(perImage(t.ms))}`)
          .join(
            ', ',
          )}, other threads ${fmt(perImage(others.slice(3).reduce((a, t) => a + t.ms, 0)))}; all ${fmt(perImage(total))} of ${fmt(perImage(SECONDS * 1000 * 2))} (2 cores x the wall time)\n`,
    );
  } finally {
    await cluster.stop();
  }
}
