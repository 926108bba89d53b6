import { cpus, totalmem } from 'node:os';
import ort from 'onnxruntime-node';

/** The header every results file starts with: when, on what, with which versions. */
export function systemLine(): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  return [
    `- date: ${new Date().toISOString()}`,
    `- machine: nproc ${cpus().length}, ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`,
    `- Node ${process.version}, onnxruntime-node ${ort.env.versions.node ?? 'unknown'}`,
  ].join('\n');
}
