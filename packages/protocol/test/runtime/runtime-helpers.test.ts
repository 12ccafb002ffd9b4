// The helpers both runtimes share (runtime/*.ts): output cap, timeout/abort triggers, stop-once, the exec
// options handed on, the long-lived process handle, finding host binaries.
import { describe, expect, it } from 'vitest';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import {
  CappedOutput,
  StopGate,
  checkWorkspaceDir,
  WrongStateError,
  execIo,
  findExecutable,
  toSandboxProcess,
  DEFAULT_MAX_OUTPUT_BYTES,
  InvalidArgumentError,
  MAX_OUTPUT_BYTES_LIMIT,
  armTermination,
  checkMaxOutputBytes,
  type TerminationTrigger,
} from '../../src/index.js';

describe('checkMaxOutputBytes', () => {
  it('defaults to 16 MiB and accepts 1..32 MiB', () => {
    expect(checkMaxOutputBytes(undefined)).toBe(DEFAULT_MAX_OUTPUT_BYTES);
    expect(DEFAULT_MAX_OUTPUT_BYTES).toBe(16 * 1024 * 1024);
    expect(checkMaxOutputBytes(1)).toBe(1);
    expect(checkMaxOutputBytes(MAX_OUTPUT_BYTES_LIMIT)).toBe(32 * 1024 * 1024);
  });

  it.each([0, -1, 1.5, Number.NaN, MAX_OUTPUT_BYTES_LIMIT + 1])(
    'refuses %s, naming the option and range',
    (v) => {
      expect(() => checkMaxOutputBytes(v)).toThrow(InvalidArgumentError);
      expect(() => checkMaxOutputBytes(v)).toThrow(/maxOutputBytes must be an integer in 1\.\.33554432/);
    },
  );
});

describe('CappedOutput', () => {
  it('keeps everything up to the cap; output that exactly fills it is not truncated', () => {
    const out = new CappedOutput(6);
    expect(out.push(Buffer.from('abc')).toString()).toBe('abc');
    expect(out.push(Buffer.from('def')).toString()).toBe('def');
    expect(out.truncated).toBe(false);
    expect(out.toBuffer().toString()).toBe('abcdef');
  });

  it('keeps the part of a chunk that fits, drops the rest and everything after, and says so', () => {
    const out = new CappedOutput(5);
    out.push(Buffer.from('abc'));
    expect(out.push(Buffer.from('defgh')).toString()).toBe('de');
    expect(out.truncated).toBe(true);
    expect(out.push(Buffer.from('more')).length).toBe(0);
    expect(out.toBuffer().toString()).toBe('abcde');
  });
});

describe('armTermination', () => {
  it('terminates on timeout, and not again once the command has ended', async () => {
    const calls: TerminationTrigger[] = [];
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    armTermination({
      timeoutMs: 10,
      terminate: (why) => {
        calls.push(why);
        end();
        return Promise.resolve();
      },
      onError: () => undefined,
      ended,
    });
    await ended;
    expect(calls).toEqual(['timeout']);
  });

  it('terminates at once for an already aborted signal, and on a later abort', () => {
    const calls: TerminationTrigger[] = [];
    const terminate = (why: TerminationTrigger): Promise<void> => {
      calls.push(why);
      return Promise.resolve();
    };
    armTermination({
      signal: AbortSignal.abort(),
      terminate,
      onError: () => undefined,
      ended: new Promise(() => undefined),
    });
    expect(calls).toEqual(['abort']);
    const controller = new AbortController();
    armTermination({
      signal: controller.signal,
      terminate,
      onError: () => undefined,
      ended: new Promise(() => undefined),
    });
    controller.abort();
    expect(calls).toEqual(['abort', 'abort']);
  });

  it('removes its abort listener and timer when the command ends (even by rejecting)', async () => {
    const controller = new AbortController();
    const calls: TerminationTrigger[] = [];
    const ended = Promise.reject(new Error('command failed to start'));
    armTermination({
      timeoutMs: 20,
      signal: controller.signal,
      terminate: (why) => {
        calls.push(why);
        return Promise.resolve();
      },
      onError: () => undefined,
      ended,
    });
    await ended.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 40));
    controller.abort();
    expect(calls).toEqual([]);
  });

  it('hands a failing terminate to onError instead of rejecting unhandled', async () => {
    const errors: unknown[] = [];
    const failure = new Error('kill failed');
    armTermination({
      signal: AbortSignal.abort(),
      terminate: () => Promise.reject(failure),
      onError: (err) => errors.push(err),
      ended: new Promise(() => undefined),
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual([failure]);
  });
});

describe('StopGate', () => {
  it('runs the teardown once, refuses commands after it, and reports a start that failed as the stop', async () => {
    const gate = new StopGate('sb_1');
    let teardowns = 0;
    const teardown = (): Promise<void> => {
      teardowns++;
      return Promise.resolve();
    };
    gate.assertRunning();
    await expect(gate.unlessStopped(Promise.reject(new Error('spawn failed')))).rejects.toThrow(
      'spawn failed',
    );
    const first = gate.stop(teardown);
    expect(gate.stop(teardown)).toBe(first);
    await first;
    expect(teardowns).toBe(1);
    expect(() => gate.assertRunning()).toThrow(new WrongStateError('sandbox sb_1 is stopped'));
    await expect(gate.unlessStopped(Promise.reject(new Error('killed')))).rejects.toThrow(
      /sandbox sb_1 was stopped while the command was starting/,
    );
  });
});

describe('execIo', () => {
  it('passes on only what was given, with a string stdin as bytes', () => {
    expect(execIo({ command: 'true' })).toEqual({});
    const signal = new AbortController().signal;
    const io = execIo({ command: 'cat', stdin: 'héllo', timeoutMs: 5, signal, env: { A: '1' }, cwd: '/tmp' });
    expect(io).toEqual({ stdin: Buffer.from('héllo'), timeoutMs: 5, signal });
  });
});

describe('toSandboxProcess', () => {
  it('kill() terminates, drains the unread output and waits for the exit', async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    stdout.write('unread output');
    let finish!: () => void;
    const exited = new Promise<{ exitCode: number | null; signal: string | null }>((resolve) => {
      finish = () => resolve({ exitCode: null, signal: 'SIGKILL' });
    });
    let terminated = 0;
    const proc = toSandboxProcess({
      pid: 42,
      stdin: new PassThrough(),
      stdout,
      stderr,
      audit: {
        runtime: 'bwrap',
        argv: ['bwrap'],
        limits: { memoryBytes: null, cpuQuota: null, cpuShares: null, pidsLimit: null, mechanism: 'none' },
      },
      exited,
      terminate: () => {
        terminated++;
        setImmediate(finish);
        return Promise.resolve();
      },
    });
    expect(proc.pid).toBe(42);
    await proc.kill();
    expect(terminated).toBe(1);
    expect(stdout.isPaused()).toBe(false);
    expect(await proc.wait()).toEqual({ exitCode: null, signal: 'SIGKILL' });
  });
});

describe('findExecutable', () => {
  it('finds a configured executable, and answers null for a missing or non-executable one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-find-exe-'));
    try {
      const tool = join(dir, 'af-find-exe-tool');
      await writeFile(tool, '#!/bin/sh\n');
      await expect(findExecutable({ name: 'af-find-exe-tool', configured: tool })).resolves.toBeNull();
      await chmod(tool, 0o755);
      await expect(findExecutable({ name: 'af-find-exe-tool', configured: tool })).resolves.toBe(tool);
      await expect(
        findExecutable({ name: 'af-find-exe-tool', configured: join(dir, 'missing') }),
      ).resolves.toBeNull();
      await expect(findExecutable({ name: 'af-find-exe-tool', fallbackDirs: [dir] })).resolves.toBe(tool);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('checkWorkspaceDir', () => {
  it('accepts a directory and refuses a missing path or a file, naming the path', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-workspace-'));
    try {
      await expect(checkWorkspaceDir(dir)).resolves.toBeUndefined();
      const file = join(dir, 'file');
      await writeFile(file, 'x');
      await expect(checkWorkspaceDir(file)).rejects.toThrow(
        new InvalidArgumentError(`workspace ${file} is not a directory`),
      );
      await expect(checkWorkspaceDir(join(dir, 'missing'))).rejects.toThrow(
        /workspace .*missing is not accessible: ENOENT/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
