// The logging surface both runtimes need; a pino logger (or a child of one) satisfies it. The fallback
// writes only when called (nothing happens at import), so this module stays free of side effects.

/** Minimal structured logger: `logger.debug({ err }, 'what happened')`. */
export interface RuntimeLogger {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * Default logger of a runtime used without one: drops debug, writes warnings to stderr as one JSON line
 * tagged with `component` (pass pino to do better).
 */
export function createStderrLogger(component: string): RuntimeLogger {
  return {
    debug: () => undefined,
    warn: (obj, msg) => {
      const fields = Object.fromEntries(
        Object.entries(obj).map(([k, v]) => [
          k,
          v instanceof Error ? { message: v.message, code: (v as NodeJS.ErrnoException).code } : v,
        ]),
      );
      process.stderr.write(`${JSON.stringify({ level: 'warn', component, msg, ...fields })}\n`);
    },
  };
}
