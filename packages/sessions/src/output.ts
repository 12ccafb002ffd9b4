// The library's one output shape (docs/decisions.md "One library shape: strings by default, bytes on
// request"): every call that runs a command — Sandbox.run, Sandbox.stream, Session.run, ControlPlane.run —
// gives stdout and stderr as UTF-8 strings, or as Buffers with `{ encoding: 'buffer' }`; a timeout is always
// `timeoutMs` (the runtime contract's name).
import { InvalidArgumentError } from '@agentfense/protocol';
import type { ExecResult } from '@agentfense/protocol';

/** How command output is delivered: UTF-8 strings (the default) or the exact bytes. */
export type OutputEncoding = 'utf8' | 'buffer';

/** Output as text (the default). */
export interface TextOutput {
  /** Default 'utf8': stdout and stderr as strings (invalid UTF-8 becomes U+FFFD). */
  readonly encoding?: 'utf8' | undefined;
}

/** Output as the exact bytes. */
export interface BytesOutput {
  readonly encoding: 'buffer';
}

/** A result with its output decoded as UTF-8. */
export type Decoded<R extends { readonly stdout: Buffer; readonly stderr: Buffer }> = Omit<
  R,
  'stdout' | 'stderr'
> & {
  readonly stdout: string;
  readonly stderr: string;
};

/** A command's result with stdout and stderr as UTF-8 strings (the default of `run`). */
export interface RunResult extends Omit<ExecResult, 'stdout' | 'stderr'> {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Checks the encoding and the options a caller of the previous shape might still pass (`timeout`, which
 * would otherwise be ignored silently), and returns the options without `encoding`.
 */
export function splitEncoding<O extends object>(
  options: O & { readonly encoding?: OutputEncoding | undefined },
): { encoding: OutputEncoding; rest: Omit<O, 'encoding'> } {
  const { encoding = 'utf8', ...rest } = options;
  if (encoding !== 'utf8' && encoding !== 'buffer') {
    throw new InvalidArgumentError(
      `encoding must be 'utf8' (strings, the default) or 'buffer' (bytes), got ${JSON.stringify(encoding)}`,
    );
  }
  if ((rest as { readonly timeout?: unknown }).timeout !== undefined) {
    throw new InvalidArgumentError('timeout is not an option: use timeoutMs (milliseconds)');
  }
  return { encoding, rest };
}

/** The result with stdout and stderr as UTF-8 strings. */
export function decodeOutput<R extends { readonly stdout: Buffer; readonly stderr: Buffer }>(
  result: R,
): Decoded<R> {
  return { ...result, stdout: result.stdout.toString('utf8'), stderr: result.stderr.toString('utf8') };
}
