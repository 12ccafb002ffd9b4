import { ERROR_CODES, fromWire, InternalError, NotFoundError } from '@agentfense/protocol';
import { constants } from 'node:os';
import { describe, expect, it } from 'vitest';

import { asFsError, FsError, toErrno, toErrnoName } from '../src/errors.js';

describe('toErrno', () => {
  const byKind: Record<(typeof ERROR_CODES)[number], string> = {
    AF_INVALID_ARGUMENT: 'EINVAL',
    AF_NOT_FOUND: 'ENOENT',
    AF_ALREADY_EXISTS: 'EEXIST',
    AF_WRONG_STATE: 'EBUSY',
    AF_CONFLICT: 'EBUSY',
    AF_PERMISSION_DENIED: 'EACCES',
    AF_NO_SPACE: 'ENOSPC',
    AF_TIMEOUT: 'ETIMEDOUT',
    AF_CANCELLED: 'EINTR',
    AF_UNAVAILABLE: 'EIO',
    AF_PROTOCOL: 'EIO',
    AF_WORKER_EXITED: 'EIO',
    AF_INTERNAL: 'EIO',
  };
  it.each(ERROR_CODES.map((code) => [code, byKind[code]] as const))('%s -> %s', (code, errno) => {
    const err = fromWire({ code, message: 'x' });
    expect(toErrnoName(err)).toBe(errno);
    expect(toErrno(err)).toBe((constants.errno as Record<string, number>)[errno]);
  });

  it.each([
    [new FsError('ENOTEMPTY', 'dir'), 'ENOTEMPTY', 'AF_CONFLICT'],
    [new FsError('EXDEV', 'dir'), 'EXDEV', 'AF_WRONG_STATE'],
    [new FsError('ENOENT', 'x'), 'ENOENT', 'AF_NOT_FOUND'],
    [new FsError('EIO', 'x'), 'EIO', 'AF_INTERNAL'],
    [new FsError('ENOSPC', 'full'), 'ENOSPC', 'AF_NO_SPACE'],
    [new FsError('EDQUOT', 'quota'), 'EDQUOT', 'AF_NO_SPACE'],
  ])('FsError %s keeps its errno', (err, errno, kind) => {
    expect(toErrnoName(err)).toBe(errno);
    expect(err.code).toBe(kind);
    expect(err.errno).toBe((constants.errno as Record<string, number>)[errno]);
  });

  it('maps Node errors by code and anything else to EIO', () => {
    expect(toErrnoName(Object.assign(new Error('x'), { code: 'ELOOP' }))).toBe('ELOOP');
    expect(toErrnoName(Object.assign(new Error('x'), { code: 'ERR_SOMETHING' }))).toBe('EIO');
    expect(toErrnoName('boom')).toBe('EIO');
    expect(toErrnoName(new InternalError('x'))).toBe('EIO');
    expect(toErrnoName(new NotFoundError('x'))).toBe('ENOENT');
    expect(asFsError(Object.assign(new Error('gone'), { code: 'ENOENT' }), 'lookup /a').errnoName).toBe(
      'ENOENT',
    );
  });
});
