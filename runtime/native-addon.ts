import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * One of the addons `npm run build` compiles into dist/native/ (scripts/build-native.mjs), loaded
 * once, or why this process goes without it: not built (no C compiler when the package was built,
 * or not Linux), or it does not load. Every addon is optional: callers fall back and say so.
 */
export function nativeAddon<T>(file: string): () => T | string {
  const path = fileURLToPath(new URL(`../native/${file}`, import.meta.url));
  let loaded: T | string | undefined;
  return () => {
    if (loaded !== undefined) return loaded;
    if (!existsSync(path)) return (loaded = `the addon was not built (${path}; see scripts/build-native.mjs)`);
    try {
      loaded = createRequire(import.meta.url)(path) as T;
    } catch (err) {
      loaded = `the addon does not load: ${(err as Error).message.split('\n')[0]}`;
    }
    return loaded;
  };
}
