// The control plane at scale (issue 27): `npm run bench:scale -- --nodes N --gpus-per-node G
// --deployments D --replicas R [--json]`. A real head in its own process; N simulated node agents
// and their actors in this one, speaking the real protocols over real sockets (bench/scale/sim-*.ts).
// Figures and how they were taken: bench/RESULTS-scale.md.
import { parseScaleOptions } from './options.js';
import { runScale } from './run-scale.js';

const options = parseScaleOptions(process.argv.slice(2));
const figures = await runScale(options, (line) => {
  if (!options.json) process.stdout.write(`${line}\n`);
});
if (options.json) process.stdout.write(`${JSON.stringify(figures)}\n`);
else process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
