import { TroupeError } from '../errors.js';
import type { RunRef } from '../protocol/client.js';

/**
 * The tensor a future passed as input `input` means, among the outputs of the run it names: the
 * named output, or the run's only output, or the output with the input's own name. The head
 * resolves futures of the runs it holds with this, and the SDK the futures of runs it sent to
 * replicas itself, so both answer alike.
 */
export function pickReferenced<T>(input: string, ref: RunRef, outputs: Record<string, T>): T {
  const names = Object.keys(outputs);
  const pick = ref.output ?? (names.length === 1 ? names[0]! : names.includes(input) ? input : undefined);
  const tensor = pick === undefined ? undefined : outputs[pick];
  if (tensor === undefined) {
    const has = names.map((n) => `'${n}'`).join(', ');
    const hint = ref.output === undefined ? `; pass one with future.output('${names[0] ?? 'name'}')` : '';
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `input '${input}' refers to ${ref.output ? `output '${ref.output}' of ` : ''}run '${ref.run}', which has outputs ${has}${hint}`,
    );
  }
  return tensor;
}

/** The error of a run whose input came from a run that failed: the same code, saying which. */
export function referenceFailed(input: string, ref: RunRef, err: unknown): TroupeError {
  const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
  return new TroupeError(code, `input '${input}' comes from run '${ref.run}', which failed: ${(err as Error).message}`);
}
