import { TroupeError } from '../runtime/internal.js';

/**
 * Runs `load` (a user's module imported, its class constructed) with `process.exit` refused: a
 * module that ends the process while it loads (a script, not a module of classes) then fails to
 * load with TROUPE_ERR_MODEL_LOAD, refused like a constructor that throws, instead of exiting
 * before it could say why and being restarted until its deployment was UNHEALTHY.
 */
export async function refusingExit<T>(what: string, load: () => Promise<T>): Promise<T> {
  const exit = process.exit;
  process.exit = ((code?: number | string | null) => {
    throw new TroupeError(
      'TROUPE_ERR_MODEL_LOAD',
      `${what} called process.exit(${code ?? ''}) while loading: a class actor's module must not end its process (is it a script rather than a module of classes?)`,
    );
  }) as typeof process.exit;
  try {
    return await load();
  } finally {
    process.exit = exit;
  }
}
