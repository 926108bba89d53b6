// One floor measurement in a process of its own, for measureFloorApart (floor.ts): loads the model
// and warms it up, says so, measures when told to, sends its FloorResult and exits.
// argv: MODEL INPUT_NAME ROW_SHAPE_JSON BATCH THREADS SECONDS
import { measureFloor } from './floor.js';

const [model, name, row, batch, threads, seconds] = process.argv.slice(2);
const rowShape = JSON.parse(row!) as number[];
const go = () =>
  new Promise<void>((resolve) => {
    process.once('message', () => resolve());
    process.send!('ready');
  });
const result = await measureFloor(
  model!,
  { name: name!, shape: (b) => [b, ...rowShape] },
  Number(batch),
  Number(seconds),
  Number(threads),
  go,
);
process.send!(result, () => process.exit(0));
