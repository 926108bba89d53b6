/**
 * Script entry: `node dist/models/generate.js OUTDIR` writes mlp.onnx, cnn.onnx and
 * mobilenet.onnx into OUTDIR and prints their paths.
 */
import { writeExampleModels } from './write.js';

const outDir = process.argv[2];
if (outDir === undefined || outDir === '') {
  process.stderr.write('usage: node dist/models/generate.js OUTDIR\n  writes mlp.onnx, cnn.onnx and mobilenet.onnx into OUTDIR\n');
  process.exit(2);
}

try {
  const paths = await writeExampleModels(outDir);
  for (const [name, file] of Object.entries(paths)) process.stdout.write(`${name}\t${file}\n`);
} catch (err) {
  process.stderr.write(`generate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
