// The logging surface this package needs; a pino logger (or a child of one) satisfies it.

/** Minimal structured logger: `logger.debug({ err }, 'what happened')`. */
export interface RuntimeLogger {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Default logger: drops debug, writes warnings to stderr as one JSON line (pass pino to do better). */
export function createStderrLogger(): RuntimeLogger {
  return {
    debug: () => undefined,
    warn: (obj, msg) => {
      const fields = Object.fromEntries(
        Object.entries(obj).map(([k, v]) => [
          k,
          v instanceof Error ? { message: v.message, code: (v as NodeJS.ErrnoException).code } : v,
        ]),
      );
      process.stderr.write(
        `${JSON.stringify({ level: 'warn', component: 'runtime-docker', msg, ...fields })}\n`,
      );
    },
  };
}
