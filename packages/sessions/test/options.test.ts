// Validation of what callers pass to createSession() and exec().
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { isSessionId, newSessionId } from '../src/ids.js';
import {
  DEFAULT_IDLE_TIMEOUT_MS,
  MAX_STDIN_BYTES,
  resolveCreateOptions,
  resolveExec,
} from '../src/options.js';

describe('session options', () => {
  it('defaults to /bin/sh, a fresh ses_<uuid> and the default idle timeout', () => {
    const resolved = resolveCreateOptions({});
    expect(resolved.shell).toBe('/bin/sh');
    expect(isSessionId(resolved.id)).toBe(true);
    expect(resolved.idleTimeoutMs).toBe(DEFAULT_IDLE_TIMEOUT_MS);
  });

  it.each([
    [{ shell: '/bin/zsh' }, /invalid session shell "\/bin\/zsh"/],
    [{ shell: 'bash' }, /expected one of \/bin\/sh, \/bin\/bash/],
    [{ id: 'ses_../../etc' }, /invalid session id/],
    [{ id: 'sb_6c3a1c8e-1f0e-4a7a-9c55-2c1d8f0e3b11' }, /invalid session id/],
    [{ idleTimeoutMs: 0 }, /idleTimeoutMs/],
    [{ idleTimeoutMs: Infinity }, /idleTimeoutMs/],
    [{ maxOutputBytes: 1.5 }, /maxOutputBytes/],
  ])('rejects %j', (options, message) => {
    expect(() => resolveCreateOptions(options as never)).toThrow(InvalidArgumentError);
    expect(() => resolveCreateOptions(options as never)).toThrow(message);
  });

  it('accepts a given well-formed id', () => {
    const id = newSessionId();
    expect(resolveCreateOptions({ id }).id).toBe(id);
  });
});

describe('exec options', () => {
  it('encodes the command and stdin as bytes', () => {
    expect(resolveExec('é', { stdin: 'x', timeoutMs: 5 })).toEqual({
      command: Buffer.from('é'),
      stdin: Buffer.from('x'),
      timeoutMs: 5,
    });
    expect(resolveExec('true', { stdin: new Uint8Array([0, 1]) }).stdin).toEqual(Buffer.from([0, 1]));
  });

  it.each([
    ['a NUL in the command', 'a\0b', {}, /NUL/],
    ['a non-string command', 42, {}, /must be a string/],
    ['a negative timeout', 'true', { timeoutMs: -1 }, /timeoutMs/],
    ['a NaN timeout', 'true', { timeoutMs: Number.NaN }, /timeoutMs/],
    ['oversized stdin', 'cat', { stdin: Buffer.alloc(MAX_STDIN_BYTES + 1) }, /stdin is limited/],
    ['stdin of the wrong type', 'cat', { stdin: 42 }, /stdin must be/],
  ])('rejects %s', (_name, command, options, message) => {
    expect(() => resolveExec(command, options as never)).toThrow(InvalidArgumentError);
    expect(() => resolveExec(command, options as never)).toThrow(message);
  });
});
