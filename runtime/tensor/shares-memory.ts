/**
 * Whether some output's bytes lie in the same memory as some input's: a model or graph that
 * passes an input through. Callers that would hand the inputs' buffer back for reuse ask first.
 * Works on tensors and wire tensors alike (typed-array data; string data never shares).
 */
export function sharesMemory(outputs: Record<string, { data: unknown }>, inputs: Record<string, { data: unknown }>): boolean {
  // A call has a tensor or two each way: pairs compared in place, nothing allocated per call.
  for (const name in outputs) {
    const out = outputs[name]!.data;
    if (!ArrayBuffer.isView(out)) continue;
    for (const key in inputs) {
      const input = inputs[key]!.data;
      if (ArrayBuffer.isView(input) && input.buffer === out.buffer) return true;
    }
  }
  return false;
}
