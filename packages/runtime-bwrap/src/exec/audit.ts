// The audit form of a bwrap argv: host paths replaced by placeholders and caller env values redacted, so
// the record can be shown to users and stored without revealing the host's layout or secrets. The masking
// itself is @agentfense/protocol's (runtime/audit-mask.ts); this walks bwrap's argv: `--setenv NAME VALUE`
// and the command after `--`.
import type { MaskArgvOptions } from '@agentfense/protocol';
import { maskEnvValue, maskHostPaths } from '@agentfense/protocol';

/** The audit argv: host paths masked, caller env values redacted. */
export function maskArgv(options: MaskArgvOptions): string[] {
  const out: string[] = [];
  const { argv, placeholders } = options;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') {
      // The command itself: still mask host paths (they should not appear, but never leak them).
      for (const rest of argv.slice(i)) out.push(maskHostPaths(rest, placeholders));
      break;
    }
    if (arg === '--setenv' && i + 2 < argv.length) {
      const name = argv[i + 1] ?? '';
      out.push(arg, name, maskEnvValue(name, argv[i + 2] ?? '', options));
      i += 2;
      continue;
    }
    out.push(maskHostPaths(arg, placeholders));
  }
  return out;
}
