// One command in an orchestrated sandbox: the node agent runs it through af-init and streams its output;
// this keeps the output (up to the same per-stream cap as a local runtime) and hands each chunk to the
// caller's callbacks as it arrives, so the faces stream it as they do for a local sandbox.
import { DEFAULT_MAX_OUTPUT_BYTES, type ExecResult } from '@agentfense/protocol';
import type { SandboxExecOptions } from '../sandboxes/types.js';
import type { SandboxRow } from '../store/sandboxes.js';
import type { NodeAgentClient } from './node-agent-client.js';

/** Output kept per stream, as far as the cap allows. */
class Kept {
  readonly #chunks: Buffer[] = [];
  #size = 0;

  constructor(private readonly keep: boolean) {}

  add(chunk: Buffer): void {
    if (!this.keep || this.#size >= DEFAULT_MAX_OUTPUT_BYTES) return;
    const part = chunk.subarray(0, DEFAULT_MAX_OUTPUT_BYTES - this.#size);
    this.#chunks.push(part);
    this.#size += part.length;
  }

  get bytes(): Buffer {
    return Buffer.concat(this.#chunks);
  }
}

export async function remoteExec(
  client: NodeAgentClient,
  row: SandboxRow,
  command: string | readonly string[],
  options: SandboxExecOptions,
): Promise<ExecResult> {
  // A string runs through /bin/sh -c, as every runtime does.
  const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : [...command];
  const keep = options.keepOutput !== false;
  const [stdout, stderr] = [new Kept(keep), new Kept(keep)];
  const env = { ...row.env, ...options.env };
  const exit = await client.exec(row.id, {
    argv,
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(Object.keys(env).length === 0 ? {} : { env }),
    ...(options.stdin === undefined
      ? {}
      : { stdin: typeof options.stdin === 'string' ? Buffer.from(options.stdin) : options.stdin }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    onStdout: async (chunk) => {
      stdout.add(chunk);
      await options.onStdout?.(chunk);
    },
    onStderr: async (chunk) => {
      stderr.add(chunk);
      await options.onStderr?.(chunk);
    },
  });
  return {
    stdout: stdout.bytes,
    stderr: stderr.bytes,
    exitCode: exit.exitCode,
    signal: exit.signal,
    timedOut: exit.timedOut,
    cancelled: options.signal?.aborted === true,
    oomKilled: exit.oomKilled,
    durationMs: exit.durationMs,
    audit: {
      runtime: 'docker',
      argv,
      limits: {
        memoryBytes: row.resources.memoryBytes ?? null,
        cpuQuota: row.resources.cpuQuota ?? null,
        cpuShares: null,
        pidsLimit: null,
        mechanism: 'orchestrator',
      },
    },
  };
}
