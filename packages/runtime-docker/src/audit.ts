// The audit form of a docker argv: host paths replaced by placeholders, caller env values redacted and our
// constant wrapper script shortened, so the record can be shown to users and stored without revealing the
// host's layout or secrets.
import { WRAPPER_PLACEHOLDER, WRAPPER_SCRIPT } from './args.js';

/** A host path and the placeholder that replaces it in audit records (e.g. `<workspace>`). */
export interface PathPlaceholder {
  readonly hostPath: string;
  readonly placeholder: string;
}

export interface MaskArgvOptions {
  readonly argv: readonly string[];
  readonly placeholders: readonly PathPlaceholder[];
  /** Names whose `--env NAME=VALUE` value is replaced by `<redacted>` (caller-supplied variables). */
  readonly redactEnv?: ReadonlySet<string>;
}

/** Characters that may follow a host path in a docker argument (`source=/p,target=…`, `"/p"`, `/p:…`). */
const PATH_BOUNDARY = new Set([undefined, '/', ':', ' ', '=', ',', '"']);

/** Replaces every occurrence of a host path (at a path boundary) by its placeholder; longest path first. */
export function maskHostPaths(arg: string, placeholders: readonly PathPlaceholder[]): string {
  let out = arg;
  const sorted = [...placeholders]
    .filter((p) => p.hostPath.length > 1)
    .sort((a, b) => b.hostPath.length - a.hostPath.length);
  for (const { hostPath, placeholder } of sorted) {
    let from = 0;
    for (;;) {
      const at = out.indexOf(hostPath, from);
      if (at < 0) break;
      // Only whole path components: `/data/ws` must not match inside `/data/wsx`.
      if (PATH_BOUNDARY.has(out[at + hostPath.length])) {
        out = out.slice(0, at) + placeholder + out.slice(at + hostPath.length);
        from = at + placeholder.length;
      } else {
        from = at + hostPath.length;
      }
    }
  }
  return out;
}

/** The audit argv: host paths masked, caller env values redacted, the wrapper script shortened. */
export function maskArgv(options: MaskArgvOptions): string[] {
  const { argv, placeholders, redactEnv } = options;
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === WRAPPER_SCRIPT) {
      out.push(WRAPPER_PLACEHOLDER);
      continue;
    }
    if (arg === '--env' && i + 1 < argv.length) {
      const assignment = argv[i + 1] ?? '';
      const eq = assignment.indexOf('=');
      const name = eq < 0 ? assignment : assignment.slice(0, eq);
      const value = eq < 0 ? '' : assignment.slice(eq + 1);
      const shown = redactEnv?.has(name) === true ? '<redacted>' : maskHostPaths(value, placeholders);
      out.push(arg, eq < 0 ? name : `${name}=${shown}`);
      i += 1;
      continue;
    }
    out.push(maskHostPaths(arg, placeholders));
  }
  return out;
}
