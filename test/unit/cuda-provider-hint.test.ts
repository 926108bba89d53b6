import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { cudaProviderHint, ortBinaryDir } from '../../actors/cuda-provider-hint.js';

// onnxruntime-node's words on an H200 host with the CPU-only install (docs/operations.md#gpu-hosts).
const LOAD_FAILED = 'OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library';

test("onnxruntime-node's binary folder is where its own library is", () => {
  assert.ok(existsSync(join(ortBinaryDir(), 'libonnxruntime.so.1')), ortBinaryDir());
});

test('the hint names the step a GPU host is missing: the provider, or the CUDA 12 libraries it loads', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ort-bin-'));
  try {
    const withoutProvider = cudaProviderHint(LOAD_FAILED, dir);
    assert.match(
      withoutProvider,
      /no CUDA provider installed.*ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules\/onnxruntime-node\/script\/install\.js/,
    );

    await writeFile(join(dir, 'libonnxruntime_providers_cuda.so'), '');
    const withProvider = cudaProviderHint('Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12', dir);
    assert.match(withProvider, /CUDA provider is installed but did not load: it needs the CUDA 12 and cuDNN 9 runtime libraries/);
    assert.match(withProvider, /libcudart\.so\.12.*libcudnn\.so\.9/);
    assert.doesNotMatch(withProvider, /ONNXRUNTIME_NODE_INSTALL/);

    // Any other failure (a bad model, an out-of-memory GPU) is onnxruntime's alone to explain.
    assert.equal(cudaProviderHint('CUDA failure 2: out of memory', dir), '');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
