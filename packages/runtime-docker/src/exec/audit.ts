// The audit form of a docker argv: host paths replaced by placeholders, caller env values redacted and our
// constant wrapper script shortened, so the record can be shown to users and stored without revealing the
// host's layout or secrets. The masking itself is @agentfense/protocol's (runtime/audit-mask.ts); this adds
// docker's path boundaries and walks docker's argv: `--env NAME=VALUE` and the wrapper script.
import type { MaskArgvOptions, PathPlaceholder } from '@agentfense/protocol';
import { HOST_PATH_BOUNDARY, maskEnvValue, maskHostPaths as maskHostPathsAt } from '@agentfense/protocol';
import { WRAPPER_PLACEHOLDER, WRAPPER_SCRIPT } from './args.js';

/** Characters that may follow a host path in a docker argument (`source=/p,target=…`, `"/p"`, `/p:…`). */
const PATH_BOUNDARY: ReadonlySet<string> = new Set([...HOST_PATH_BOUNDARY, ',', '"']);

/** Replaces every occurrence of a host path (at a docker path boundary) by its placeholder; longest first. */
export function maskHostPaths(arg: string, placeholders: readonly PathPlaceholder[]): string {
  return maskHostPathsAt(arg, placeholders, PATH_BOUNDARY);
}

/** The audit argv: host paths masked, caller env values redacted, the wrapper script shortened. */
export function maskArgv(options: MaskArgvOptions): string[] {
  const { argv, placeholders } = options;
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
      out.push(arg, eq < 0 ? name : `${name}=${maskEnvValue(name, value, options, PATH_BOUNDARY)}`);
      i += 1;
      continue;
    }
    out.push(maskHostPaths(arg, placeholders));
  }
  return out;
}
