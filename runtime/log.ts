import pino from 'pino';

export type Logger = pino.Logger;

/**
 * Structured JSON logs on stderr (stdout stays free for what a command prints for people and
 * scripts). `TROUPE_LOG_LEVEL` sets the level. Never log tokens or tensor contents.
 */
export function createLogger(component: string): Logger {
  return pino(
    {
      name: `troupe-${component}`,
      level: process.env.TROUPE_LOG_LEVEL ?? 'info',
      base: { pid: process.pid },
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
        ],
        censor: '[redacted]',
      },
    },
    pino.destination({ fd: 2, sync: false }),
  );
}
