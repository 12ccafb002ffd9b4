// The core of a runtime's audit argv (ExecAudit.argv): host paths replaced by placeholders and caller env
// values redacted, so the record can be shown to users and stored without revealing the host's layout or
// secrets. Which arguments hold env values (`--setenv NAME VALUE`, `--env NAME=VALUE`) and which characters
// may follow a path in an argument are the runtime's: each runtime walks its own argv with these.

/** A host path and the placeholder that replaces it in audit records (e.g. `<workspace>`). */
export interface PathPlaceholder {
  readonly hostPath: string;
  readonly placeholder: string;
}

/** What a runtime's `maskArgv` takes. */
export interface MaskArgvOptions {
  readonly argv: readonly string[];
  readonly placeholders: readonly PathPlaceholder[];
  /** Names whose env value is replaced by `<redacted>` (caller-supplied variables). */
  readonly redactEnv?: ReadonlySet<string>;
}

/** What replaces a redacted env value. */
export const REDACTED = '<redacted>';

/**
 * Characters that may follow a host path for it to be masked (the end of the argument always may):
 * `/p/sub`, `/p:/target`, `a /p b`, `NAME=/p`. A runtime whose arguments hold paths in other syntax
 * (docker's `source=/p,target=…`, `"/p"`) adds its own.
 */
export const HOST_PATH_BOUNDARY: ReadonlySet<string> = new Set(['/', ':', ' ', '=']);

/**
 * Replaces every occurrence of a host path by its placeholder, longest path first, only where the path is
 * followed by the end of `arg` or by a character of `boundary` (`/data/ws` never matches inside `/data/wsx`).
 */
export function maskHostPaths(
  arg: string,
  placeholders: readonly PathPlaceholder[],
  boundary: ReadonlySet<string> = HOST_PATH_BOUNDARY,
): string {
  let out = arg;
  const sorted = [...placeholders]
    .filter((p) => p.hostPath.length > 1)
    .sort((a, b) => b.hostPath.length - a.hostPath.length);
  for (const { hostPath, placeholder } of sorted) {
    let from = 0;
    for (;;) {
      const at = out.indexOf(hostPath, from);
      if (at < 0) break;
      const after = out[at + hostPath.length];
      if (after === undefined || boundary.has(after)) {
        out = out.slice(0, at) + placeholder + out.slice(at + hostPath.length);
        from = at + placeholder.length;
      } else {
        from = at + hostPath.length;
      }
    }
  }
  return out;
}

/** The audit form of one env value: `<redacted>` for a name in `redactEnv`, else the value with paths masked. */
export function maskEnvValue(
  name: string,
  value: string,
  options: Pick<MaskArgvOptions, 'placeholders' | 'redactEnv'>,
  boundary: ReadonlySet<string> = HOST_PATH_BOUNDARY,
): string {
  return options.redactEnv?.has(name) === true
    ? REDACTED
    : maskHostPaths(value, options.placeholders, boundary);
}
