// The seccomp filter of every sandboxed command: the shared deny list (@agentfense/protocol's
// runtime/seccomp.ts) compiled to BPF by libseccomp through the small `agentfense-seccomp` program that
// scripts/setup builds (native/seccomp-export.c), handed to `bwrap --seccomp FD`. Compiled once per rule
// set and cached on disk (the file name carries a hash of the rules), so a one-shot CLI reads ~2 KB
// instead of running the compiler. No hand-written BPF: libseccomp handles architectures and ABIs.
import { createHash } from 'node:crypto';
import { access, mkdir, open, rename, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UnavailableError, seccompRuleLines } from '@agentfense/protocol';

/** Where scripts/setup puts the compiler (relative to this package). */
export const DEFAULT_SECCOMP_COMPILER = fileURLToPath(
  new URL('../../native/build/agentfense-seccomp', import.meta.url),
);

/** Compiles (or reads the cached) BPF program of the shared deny list. */
export async function loadSeccompFilter(options: {
  compiler?: string | undefined;
  cacheDir: string;
}): Promise<Buffer> {
  const rules = `${seccompRuleLines().join('\n')}\n`;
  const hash = createHash('sha256').update(rules).digest('hex').slice(0, 16);
  const cached = posix.join(options.cacheDir, `seccomp-${hash}.bpf`);
  const existing = await readTrusted(cached);
  if (existing !== null && existing.length > 0 && existing.length % 8 === 0) return existing;
  const compiler = options.compiler ?? DEFAULT_SECCOMP_COMPILER;
  const found = await access(compiler).then(
    () => true,
    () => false,
  );
  if (!found) {
    throw new UnavailableError(
      `the seccomp filter compiler ${compiler} is missing: run \`bash scripts/setup\` (it builds it with ` +
        'libseccomp: apt-get install libseccomp-dev gcc)',
    );
  }
  // execa is loaded only here: a cached filter (every run but the first) needs no child process.
  const { execa } = await import('execa');
  const result = await execa(compiler, [], {
    input: rules,
    encoding: 'buffer',
    reject: false,
    env: {},
    extendEnv: false,
  });
  const bpf = Buffer.from(result.stdout);
  // A classic BPF program is a whole number of 8-byte instructions.
  if (result.exitCode !== 0 || bpf.length === 0 || bpf.length % 8 !== 0) {
    throw new UnavailableError(
      `could not compile the seccomp filter with ${compiler}: ${Buffer.from(result.stderr).toString().trim() || result.shortMessage}`,
    );
  }
  // Caching is an optimisation: a directory we cannot write (or another user's file in a sticky /tmp,
  // which rename may not replace) leaves the next start to compile again.
  try {
    await mkdir(options.cacheDir, { recursive: true, mode: 0o700 }); // the run directory: run-dir.ts opens it to the sandbox user
    const tmp = `${cached}.${process.pid}.tmp`;
    await writeFile(tmp, bpf, { mode: 0o644, flag: 'wx' }); // never through a planted symlink
    await rename(tmp, cached);
  } catch {
    // not cached
  }
  return bpf;
}

/**
 * The cached program, only if this user (or root) owns it and nobody else may write it: a cache in a
 * shared directory (the temporary directory, for a library user without a data directory) could
 * otherwise hold a permissive filter planted by another local user. Checked on the opened file itself.
 */
async function readTrusted(path: string): Promise<Buffer | null> {
  const file = await open(path, 'r').catch(() => null);
  if (file === null) return null;
  try {
    const st = await file.stat();
    const me = process.geteuid?.() ?? -1;
    if (!st.isFile() || (st.uid !== me && st.uid !== 0) || (st.mode & 0o022) !== 0) return null;
    return await file.readFile();
  } finally {
    await file.close();
  }
}
