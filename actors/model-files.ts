import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** One model file of a multiplexed set as last seen: its size and mtime tell a changed file. */
export interface ModelFile {
  path: string;
  bytes: number;
  mtimeMs: number;
}

/** What a new look at the directory found since the previous one. */
export interface FileChanges {
  added: string[];
  changed: string[];
  removed: string[];
}

/** Poll period of a multiplexed set's directory when the spec gives none (docs/multiplexing.md). */
export const DEFAULT_POLL_INTERVAL_MS = 2000;

/** The `*.onnx` files of `dir`, by name without `.onnx` (a file that vanishes while listed is left out). */
export function listModels(dir: string): Map<string, ModelFile> {
  const models = new Map<string, ModelFile>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.onnx')) continue;
    const path = join(dir, entry.name);
    const info = statSync(path, { throwIfNoEntry: false });
    if (info) models.set(entry.name.slice(0, -'.onnx'.length), { path, bytes: info.size, mtimeMs: info.mtimeMs });
  }
  return models;
}

/**
 * A multiplexed set's directory as last listed (Triton's poll mode, ModelMesh's live model
 * store): `refresh` lists it again and says which models came, changed (size or mtime) or went,
 * so a replica serves a new file without a restart and reloads a changed one on its next call.
 */
export class ModelFiles {
  readonly #dir: string;
  #files: Map<string, ModelFile>;

  constructor(dir: string) {
    this.#dir = dir;
    this.#files = listModels(dir);
  }

  get names(): string[] {
    return [...this.#files.keys()].sort();
  }

  get(name: string): ModelFile | undefined {
    return this.#files.get(name);
  }

  /** Lists the directory again; a directory that cannot be read now (removed, unmounted) lists nothing. */
  refresh(): FileChanges {
    let now: Map<string, ModelFile>;
    try {
      now = listModels(this.#dir);
    } catch {
      now = new Map();
    }
    const changes: FileChanges = { added: [], changed: [], removed: [] };
    for (const [name, file] of now) {
      const before = this.#files.get(name);
      if (!before) changes.added.push(name);
      else if (before.bytes !== file.bytes || before.mtimeMs !== file.mtimeMs) changes.changed.push(name);
    }
    for (const name of this.#files.keys()) if (!now.has(name)) changes.removed.push(name);
    this.#files = now;
    return changes;
  }
}
