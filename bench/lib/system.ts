import { cpus, totalmem } from 'node:os';
import ort from 'onnxruntime-node';

/**
 * The header every results file starts with: which generator wrote it (`script`: the npm script,
 * `file`: its source under bench/), when, on what, with which versions. A results file is its
 * generator's alone: a unit test (test/unit/docs-figures.test.ts) checks that each names one.
 */
export function systemLine(script: string, file: string): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  return [
    `- generator: \`npm run ${script}\` (${file}); nothing in this file is written by hand`,
    `- date: ${new Date().toISOString()}`,
    `- machine: nproc ${cpus().length}, ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`,
    `- Node ${process.version}, onnxruntime-node ${ort.env.versions.node ?? 'unknown'}`,
  ].join('\n');
}
