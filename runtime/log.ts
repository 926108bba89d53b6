import pino from 'pino';
import { prettyDestination } from './log-pretty.js';

export type Logger = pino.Logger;

/** How log lines are written: `json` (one object a line, for machines) or `pretty` (runtime/log-pretty.ts). */
export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * Logs on stderr (stdout stays free for what a command prints for people and scripts): JSON lines,
 * or readable ones when `TROUPE_LOG_FORMAT=pretty` (which the CLI sets when it runs at a terminal,
 * or for `--log-format pretty`; its child processes inherit it). `TROUPE_LOG_LEVEL` sets the level.
 * Never log tokens or tensor contents.
 */
export function createLogger(component: string): Logger {
  const pretty = process.env.TROUPE_LOG_FORMAT === 'pretty';
  return pino(
    {
      name: `troupe-${component}`,
      level: process.env.TROUPE_LOG_LEVEL ?? 'info',
      // A readable line names its component and leaves pid out (a line about an actor still
      // shows that actor's pid): JSON lines carry this process's pid for machines to group by.
      base: pretty ? {} : { pid: process.pid },
      // Tokens and actor secrets never reach a log line, whichever object carries them.
      redact: {
        paths: [
          'token',
          '*.token',
          'authorization',
          '*.authorization',
          'headers.authorization',
          '*.headers.authorization',
          'headers.cookie',
          '*.headers.cookie',
          'secret',
          '*.secret',
          'TROUPE_TOKEN',
          '*.TROUPE_TOKEN',
          'TROUPE_ACTOR_SECRET',
          '*.TROUPE_ACTOR_SECRET',
          // The head's TLS key travels to agents and replicas (docs/security.md#tls); it is never logged either.
          'tls',
          '*.tls',
          'directTls',
          '*.directTls',
        ],
        censor: '[redacted]',
      },
    },
    pretty ? prettyDestination(process.stderr) : pino.destination({ fd: 2, sync: false }),
  );
}
