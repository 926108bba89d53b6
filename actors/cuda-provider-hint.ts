import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** onnxruntime's words when the CUDA provider, or a library it needs, does not load (seen on an H200 host with the CPU-only install). */
const LOAD_FAILED = /Failed to load (shared )?library|providers_(shared|cuda)\.so/;

/** Where onnxruntime-node keeps its native libraries for this platform, and where its install script puts the CUDA provider. */
export function ortBinaryDir(): string {
  const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
  return join(dirname(entry), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

/**
 * What to add to the error of a session that failed to start with the CUDA provider, saying
 * which of the two steps a GPU host needs is missing: the provider itself (not installed by
 * default), or the CUDA 12 and cuDNN 9 libraries it loads. '' when the failure is not a library's.
 */
export function cudaProviderHint(message: string, binaryDir = ortBinaryDir()): string {
  if (!LOAD_FAILED.test(message)) return '';
  if (!existsSync(join(binaryDir, 'libonnxruntime_providers_cuda.so')))
    return (
      " (this host has a GPU but onnxruntime-node has no CUDA provider installed: on the agent's machine run " +
      '`ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js`, see docs/operations.md#gpu-hosts)'
    );
  return (
    " (onnxruntime-node's CUDA provider is installed but did not load: it needs the CUDA 12 and cuDNN 9 runtime libraries " +
    '(libcudart.so.12, libcublas.so.12, libcublasLt.so.12, libcufft.so.11, libcurand.so.10, libcudnn.so.9) on the ' +
    "agent's library path; a host with only CUDA 13's lacks them, see docs/operations.md#gpu-hosts)"
  );
}
