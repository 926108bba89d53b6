import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * One of the addons `npm run build` compiles into dist/native/ (scripts/build-native.mjs), loaded
 * once, or why this process goes without it: not built (no C compiler when the package was built,
 * or not Linux), or it does not load. Every addon is optional: callers fall back and say so.
 *
 * The client package (@troupe/client) is built from these same modules but ships no addon, so
 * that it installs without a compiler or install script. Where the server package (`troupe`) is
 * there too, the client loads the server's build of the addon: the one whose directory `troupe`'s
 * entry registered (runtime/troupe.ts: an application importing 'troupe'), else the one the
 * server package's `exports` name (`troupe/native/<file>`, installed beside the client); and goes
 * without otherwise.
 */
export function nativeAddon<T>(file: string): () => T | string {
  let loaded: T | string | undefined;
  return () => {
    if (loaded !== undefined) return loaded;
    const path = addonPath(file);
    if (typeof path !== 'string') return (loaded = path.missing);
    try {
      loaded = createRequire(import.meta.url)(path) as T;
    } catch (err) {
      loaded = `the addon does not load: ${(err as Error).message.split('\n')[0]}`;
    }
    return loaded;
  };
}

/** Where the server package's entry (runtime/troupe.ts) leaves its dist/native/ for the client's modules. */
export const SERVER_NATIVE_DIR = Symbol.for('troupe.serverNativeDir');

/** Where `file` is: this build's dist/native/, else the server package's. */
function addonPath(file: string): string | { missing: string } {
  const own = fileURLToPath(new URL(`../native/${file}`, import.meta.url));
  if (existsSync(own)) return own;
  const registered = (globalThis as Record<symbol, unknown>)[SERVER_NATIVE_DIR];
  if (typeof registered === 'string' && existsSync(join(registered, file))) return join(registered, file);
  try {
    return createRequire(import.meta.url).resolve(`troupe/native/${file}`);
  } catch {
    return {
      missing: `the addon was not built (${own}; see scripts/build-native.mjs), and no server package ('troupe') is installed beside this client to lend its own`,
    };
  }
}
