// The audit form of a bwrap argv: host paths replaced by placeholders and caller env values redacted, so
// the record can be shown to users and stored without revealing the host's layout or secrets.

/** A host path and the placeholder that replaces it in audit records (e.g. `<workspace>`). */
export interface PathPlaceholder {
  readonly hostPath: string;
  readonly placeholder: string;
}

export interface MaskArgvOptions {
  readonly argv: readonly string[];
  readonly placeholders: readonly PathPlaceholder[];
  /** Names whose `--setenv NAME VALUE` value is replaced by `<redacted>` (caller-supplied variables). */
  readonly redactEnv?: ReadonlySet<string>;
}

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
      const after = out[at + hostPath.length];
      // Only whole path components: `/data/ws` must not match inside `/data/wsx`.
      if (after === undefined || after === '/' || after === ':' || after === ' ' || after === '=') {
        out = out.slice(0, at) + placeholder + out.slice(at + hostPath.length);
        from = at + placeholder.length;
      } else {
        from = at + hostPath.length;
      }
    }
  }
  return out;
}

/** The audit argv: host paths masked, caller env values redacted. */
export function maskArgv(options: MaskArgvOptions): string[] {
  const out: string[] = [];
  const { argv, placeholders, redactEnv } = options;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') {
      // The command itself: still mask host paths (they should not appear, but never leak them).
      for (const rest of argv.slice(i)) out.push(maskHostPaths(rest, placeholders));
      break;
    }
    if (arg === '--setenv' && i + 2 < argv.length) {
      const name = argv[i + 1] ?? '';
      const value = argv[i + 2] ?? '';
      out.push(arg, name, redactEnv?.has(name) === true ? '<redacted>' : maskHostPaths(value, placeholders));
      i += 2;
      continue;
    }
    out.push(maskHostPaths(arg, placeholders));
  }
  return out;
}
