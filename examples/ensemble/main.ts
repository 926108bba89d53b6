/**
 * `npm run example:ensemble`: three models voting on 8 rows; prints each member's answer and
 * the combined one.
 */
import { tensor } from '../../runtime/index.js';
import { runExample } from '../local-cluster.js';
import { CLASSES, FEATURES, MEMBERS, argmaxRows, runEnsemble, writeEnsembleModels } from './ensemble.js';

/** Rows whose true answer is known: block `r % 8` gets a lead over the others, smaller each row. */
function sampleRows(rows: number): { x: Float32Array; truth: number[] } {
  const x = new Float32Array(rows * FEATURES);
  const truth: number[] = [];
  for (let r = 0; r < rows; r++) {
    const winner = (r * 3) % CLASSES;
    truth.push(winner);
    for (let i = 0; i < FEATURES; i++) {
      const block = Math.floor(i / (FEATURES / CLASSES));
      x[r * FEATURES + i] = Math.sin(r * 7.1 + i * 1.3) + (block === winner ? 0.8 - r * 0.05 : 0);
    }
  }
  return { x, truth };
}

await runExample({}, async ({ client, modelDir }) => {
  await writeEnsembleModels(modelDir);
  const rows = 12;
  const { x, truth } = sampleRows(rows);
  const { view, combined, members } = await runEnsemble(client, tensor('float32', [rows, FEATURES], x));
  process.stdout.write(
    `deployed ensemble '${view.name}': ${view.deployments.map((d) => `${d.name} (pid ${d.actors[0]?.pid})`).join(', ')}\n\n`,
  );
  const answers = MEMBERS.map((m) => argmaxRows(members[m]!));
  process.stdout.write(`row  truth  ${MEMBERS.map((m) => m.padEnd(9)).join('')}| vote\n`);
  for (let r = 0; r < rows; r++) {
    process.stdout.write(
      `${String(r).padEnd(5)}${String(truth[r]).padEnd(7)}${answers.map((a) => String(a[r]).padEnd(9)).join('')}| ${combined[r]}\n`,
    );
  }
  const right = (a: number[]) => a.filter((v, r) => v === truth[r]).length;
  process.stdout.write(
    `\ncorrect: ${MEMBERS.map((m, i) => `${m} ${right(answers[i]!)}/${rows}`).join(', ')}, vote ${right(combined)}/${rows}\n`,
  );
});
