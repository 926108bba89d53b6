/**
 * The suite is hermetic: no TROUPE_* setting of the caller's shell (a token, a log level, shared
 * memory turned off) reaches the SDK in a test process or anything a test starts. `npm test` loads
 * this module first in every test process (`node --test --import`), and every helper that starts a
 * process builds its environment with `childEnv`. The suite's own knobs are named TROUPE_TEST_*
 * (TROUPE_TEST_LOG_LEVEL, TROUPE_TEST_FUZZ_SEED, TROUPE_TEST_LOGS); the product never reads them.
 */
const OURS = /^TROUPE_/;
const TEST_KNOB = /^TROUPE_TEST_/;

for (const name of Object.keys(process.env)) if (OURS.test(name) && !TEST_KNOB.test(name)) delete process.env[name];

/**
 * The environment for a process a test starts: this process's, without any TROUPE_* variable,
 * with the log level a test run asks for (TROUPE_TEST_LOG_LEVEL, else `logLevel`), then `extra`.
 */
export function childEnv(extra: NodeJS.ProcessEnv = {}, logLevel = 'warn'): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!OURS.test(name)) env[name] = value;
  return { ...env, TROUPE_LOG_LEVEL: process.env.TROUPE_TEST_LOG_LEVEL ?? logLevel, ...extra };
}
