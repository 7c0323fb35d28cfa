import pino, { type Logger } from 'pino';

export type { Logger };

/** JSON lines to stdout. Anything that looks like a credential is redacted, whatever the call site logs. */
export function createLogger(name: string, level = 'info', destination?: pino.DestinationStream): Logger {
  return pino(
    {
      name,
      level,
      base: { component: name },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'token',
          '*.token',
          'authorization',
          '*.authorization',
          'headers.authorization',
          'key',
          '*.key',
          'tls.key',
        ],
        censor: '[redacted]',
      },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
