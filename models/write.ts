/** Writes the example models to disk for servers, benchmarks and demos that want files. */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildRowSum } from './utility.js';
import { buildMlp, buildMobileNetV2Like, buildSmallCnn } from './zoo.js';

/** Absolute paths of the files `writeExampleModels` wrote or found up to date. */
export interface ExampleModelPaths {
  mlp: string;
  cnn: string;
  mobilenet: string;
  rowsum: string;
}

async function sameBytes(file: string, bytes: Uint8Array): Promise<boolean> {
  try {
    return Buffer.from(bytes).equals(await readFile(file));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

// Unchanged files are left alone so their mtimes stay put (callers may cache on them), and
// changed ones are replaced by rename so a concurrent reader never sees a half-written model.
async function writeIfChanged(file: string, bytes: Uint8Array): Promise<void> {
  if (await sameBytes(file, bytes)) return;
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, bytes);
  await rename(tmp, file);
}

/**
 * Builds the example models with default options and writes `mlp.onnx`, `cnn.onnx` and
 * `mobilenet.onnx` into `dir` (created if missing; files already holding the same bytes
 * are not rewritten). Returns their absolute paths.
 */
export async function writeExampleModels(dir: string): Promise<ExampleModelPaths> {
  const root = path.resolve(dir);
  await mkdir(root, { recursive: true });
  const paths: ExampleModelPaths = {
    mlp: path.join(root, 'mlp.onnx'),
    cnn: path.join(root, 'cnn.onnx'),
    mobilenet: path.join(root, 'mobilenet.onnx'),
    rowsum: path.join(root, 'rowsum.onnx'),
  };
  // Sequential so only one model's bytes are held at a time.
  await writeIfChanged(paths.mlp, buildMlp().bytes);
  await writeIfChanged(paths.cnn, buildSmallCnn().bytes);
  await writeIfChanged(paths.mobilenet, buildMobileNetV2Like().bytes);
  await writeIfChanged(paths.rowsum, buildRowSum());
  return paths;
}
