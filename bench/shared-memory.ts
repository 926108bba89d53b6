// The design change the MobileNet 0.9x target would need on this machine, measured before it is
// built: `npm run bench:shm`, writes bench/RESULTS-shared-memory.md. Two single-threaded model
// processes (bench/baselines/socket-replica.ts) are sent the same images from this process,
// 16 in flight, either over their sockets or through shared memory (the client writes each
// image into a slot, one copy, and sends the slot's number), in windows alternating with the
// floor. Troupe's clients do the same (runtime/shm/); this shows it without the runtime around it.
// Needs the addon `npm run build` compiles where a C compiler is found; says so without it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeExampleModels } from '../models/index.js';
import { disableOrtTelemetryByDefault, sharedMemoryAddon } from '../runtime/internal.js';
import { measureFloorApart } from './lib/floor.js';
import { closedLoop } from './lib/load.js';
import { socketReplicas } from './lib/socket-replicas.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { median, report } from './lib/report.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const WINDOWS = 5;
const WINDOW_SECONDS = 2;
const CONCURRENCY = 16;
const REPLICAS = 2;
const ROW = [3, 224, 224];

const { say, lines: out } = report();

say('# Images through shared memory: the design change, measured\n');
say(systemLine('bench:shm', 'bench/shared-memory.ts'));
say(
  `- model: the repo's MobileNet-v2-shaped CNN, input [1,3,224,224] float32 (588 KiB an image); ${REPLICAS} processes x 1 intra-op thread, one image a run; ${CONCURRENCY} images in flight from one client process; command: \`npm run bench:shm\``,
);
const addon = sharedMemoryAddon();
if (typeof addon === 'string') {
  say(`\nNot measured: ${addon}.`);
} else {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-shm-'));
  const models = await writeExampleModels(dir);
  const image = new Float32Array(ROW.reduce((a, b) => a * b, 1)).map((_, i) => Math.sin(i));
  const overSockets = await socketReplicas(models.mobilenet, 'image', ROW, 1, REPLICAS);
  const throughShm = await socketReplicas(models.mobilenet, 'image', ROW, 1, REPLICAS, { addon, slots: CONCURRENCY });
  const rows: string[] = [];
  const ratios = { sockets: [] as number[], shared: [] as number[] };
  try {
    for (let i = 0; i < WINDOWS; i++) {
      const floor = (
        await measureFloorApart(models.mobilenet, { name: 'image', shape: (b) => [b, ...ROW] }, 1, WINDOW_SECONDS, 1, REPLICAS)
      ).rowsPerSecond;
      const sockets = await closedLoop(() => overSockets.call(image), { concurrency: CONCURRENCY, seconds: WINDOW_SECONDS });
      const shared = await closedLoop(() => throughShm.call(image), { concurrency: CONCURRENCY, seconds: WINDOW_SECONDS });
      ratios.sockets.push(sockets.rps / floor);
      ratios.shared.push(shared.rps / floor);
      rows.push(
        `| ${i + 1} | ${fmt(floor, 1)} | ${fmt(sockets.rps, 1)} | ${fmt(sockets.rps / floor, 2)}x | ${fmt(shared.rps, 1)} | ${fmt(shared.rps / floor, 2)}x | ${sockets.errors + shared.errors} |`,
      );
    }
  } finally {
    overSockets.stop();
    throughShm.stop();
    await rm(dir, { recursive: true, force: true });
  }
  say(`\nAlternating windows of ${WINDOW_SECONDS} s, samples/s:\n`);
  say('| window | floor (2 raw processes) | images over the sockets | vs floor | images through shared memory | vs floor | errors |');
  say('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const row of rows) say(row);
  say(
    `\nMedians over the floor: images over the sockets ${fmt(median(ratios.sockets), 2)}x; through shared memory ${fmt(median(ratios.shared), 2)}x.`,
  );
}
await writeFile(new URL('../../bench/RESULTS-shared-memory.md', import.meta.url), `${out.join('\n')}\n`);
