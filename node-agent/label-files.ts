import { dirname, join } from 'node:path';
import { TroupeError, resolveModelPath } from '../runtime/internal.js';
import { parseModelRef } from '../runtime/model-ref.js';

/**
 * Where the label files a deployment names are (Triton's `label_filename`): beside its model,
 * inside the agent's --model-dir, under the same checks as the model's own path. By output, as
 * the head named them; the actor reads them (actors/label-files.ts).
 */
export async function resolveLabelFiles(
  modelDir: string,
  model: string,
  files: Record<string, string>,
  multiplexed = false,
): Promise<Record<string, string>> {
  if (multiplexed) {
    throw new TroupeError(
      'TROUPE_ERR_MODEL_PATH',
      `label file '${Object.values(files)[0]!.slice(0, 100)}': a multiplexed deployment's models share no one folder's labels; give its labels as a list`,
    );
  }
  if (parseModelRef(model)) {
    throw new TroupeError(
      'TROUPE_ERR_MODEL_PATH',
      `label file '${Object.values(files)[0]!.slice(0, 100)}': an uploaded model has no folder on the agents; give its labels as a list in the spec`,
    );
  }
  const resolved: Record<string, string> = {};
  for (const [output, file] of Object.entries(files)) {
    const path = join(dirname(model), file);
    resolved[output] = await resolveModelPath(modelDir, path).catch((err: Error) => {
      const why = err.message.includes('not found') ? 'not found' : 'outside the model directory';
      throw new TroupeError('TROUPE_ERR_MODEL_PATH', `label file '${file.slice(0, 100)}' beside model '${model.slice(0, 100)}': ${why}`);
    });
  }
  return resolved;
}
