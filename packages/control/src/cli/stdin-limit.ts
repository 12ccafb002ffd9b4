// `run --stdin` reads the caller's standard input whole before the command starts (the sandbox's stdin is
// fed from one buffer). Capped, as the command's output is (16 MiB per stream): in the run helper that
// buffer is held by one process shared by every run of the data directory, where an unbounded stdin an
// agent controls could push it into the OOM killer and take the other runs with it.
import { InvalidArgumentError } from '@agentfense/protocol/core';

export const MAX_STDIN_BYTES = 16 * 1024 * 1024;

/** The error for a standard input over MAX_STDIN_BYTES (status 2, nothing was run). */
export function stdinTooLarge(): InvalidArgumentError {
  return new InvalidArgumentError(
    `--stdin: standard input is over ${MAX_STDIN_BYTES / 1024 / 1024} MiB, the most run passes to a command; put larger data in a file under DIR and read it from /workspace instead`,
  );
}
