// The SandboxProcess handle (runtime.ts) both runtimes return for a long-lived command (sessions), built
// from what each knows how to do: end the command's whole tree, and report its exit.
import type { ExecAudit, SandboxProcess } from '../runtime.js';

export interface SandboxProcessParts {
  /** The pid the runtime reports (bwrap: the host pid; docker: the session id inside the container). */
  readonly pid: number;
  readonly stdin: NodeJS.WritableStream;
  readonly stdout: NodeJS.ReadableStream;
  readonly stderr: NodeJS.ReadableStream;
  readonly audit: ExecAudit;
  /** Settles (never rejects) when the command's tree is gone. */
  readonly exited: Promise<{ exitCode: number | null; signal: string | null }>;
  /** Ends the command's whole tree; idempotent. */
  readonly terminate: () => Promise<void>;
}

/** The handle of a started long-lived command. */
export function toSandboxProcess(parts: SandboxProcessParts): SandboxProcess {
  const { stdout, stderr, exited } = parts;
  return {
    pid: parts.pid,
    stdin: parts.stdin,
    stdout,
    stderr,
    audit: parts.audit,
    wait: () => exited,
    kill: async () => {
      await parts.terminate();
      // The caller no longer wants the output: drain what is left so the streams (and the exit) can end.
      stdout.resume();
      stderr.resume();
      await exited;
    },
  };
}
