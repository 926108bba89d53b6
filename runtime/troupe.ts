import { fileURLToPath } from 'node:url';
import { SERVER_NATIVE_DIR } from './native-addon.js';

/**
 * What `import … from 'troupe'` is: the SDK of the client package (@troupe/client, built from
 * runtime/index.ts), re-exported. An application that installs the server package and one that
 * installs only the client then load the same modules, so there is one TroupeError and one Future
 * class between them; the head, agents and actors use their own build of runtime/ (runtime/internal.ts).
 */
export * from '@troupe/client';

// The client ships no native addon; this package does, so it tells the client's modules where
// (runtime/native-addon.ts), and a cluster connected through 'troupe' maps shared memory.
(globalThis as Record<symbol, unknown>)[SERVER_NATIVE_DIR] = fileURLToPath(new URL('../native/', import.meta.url));
