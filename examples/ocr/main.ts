/**
 * `npm run example:ocr -- path/to/image.png`: deploys the OCR pipeline and prints the text found,
 * a line per text box. Without a path it reads a sample it draws itself (examples/ocr/font.ts).
 */
import { runExample } from '../local-cluster.js';
import { renderText } from './font.js';
import { readPng } from './image.js';
import { SAMPLE_TEXT, ocrGraph, readText, writeOcrModels } from './ocr.js';

await runExample({}, async ({ client, modelDir }) => {
  const path = process.argv[2];
  // The sample is drawn in memory: no file to write, delete, or name in the output.
  const image = path ? await readPng(path) : renderText(SAMPLE_TEXT);
  if (!path) process.stdout.write(`no image given: reading a sample drawn with the bitmap font (${SAMPLE_TEXT.join(' / ')})\n`);
  await writeOcrModels(modelDir);
  const view = await client.deploy(ocrGraph());
  process.stdout.write(`deployed '${view.name}': ${view.deployments.map((d) => `${d.name} (pid ${d.actors[0]?.pid})`).join(' -> ')}\n`);

  const { lines, trace } = await readText(client, image);
  const steps = (trace ?? []).filter((s) => s.kind === 'model' || s.kind === 'fn');
  process.stdout.write(
    `${path ?? 'sample'}: ${image.width}x${image.height}, ${lines.length} line(s) of text; ${steps.map((s) => `${s.step} ${s.wallMs.toFixed(0)} ms`).join(', ')}\n\n`,
  );
  for (const line of lines) {
    process.stdout.write(`  ${line.text.padEnd(32)} score ${line.score.toFixed(3)}  box [${line.box.join(', ')}]\n`);
  }
  process.stdout.write(`\n${lines.map((l) => l.text).join('\n')}\n`);
});
