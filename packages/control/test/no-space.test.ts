// A full filesystem said once: which host errors mean "no room left", the error each becomes (naming the
// data directory and what frees room), what keeps its own message, and MCP's form without the path.
import { ConflictError, InternalError, NoSpaceError, fromWire } from '@agentfense/protocol';
import { describe, expect, it } from 'vitest';
import { asNoSpaceError, noSpaceCode, noSpaceMessage } from '../src/disk/no-space.js';
import { errorResult } from '../src/mcp/results.js';

const where = { directory: '/srv/af', operation: 'creating a codebase' };
const errno = (code: string): Error => Object.assign(new Error(`${code}: no room`), { code });

describe('no space left', () => {
  it.each([
    ['ENOSPC', errno('ENOSPC')],
    ['EDQUOT', errno('EDQUOT')],
    ['SQLITE_FULL', Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })],
    ['ENOSPC', new InternalError('destroying sandbox sb_1: boom', { cause: errno('ENOSPC') })],
    // A worker's FsError after the wire: the kind, with the errno first in its message.
    ['EDQUOT', fromWire({ code: 'AF_NO_SPACE', message: 'EDQUOT: discard: quota' })],
  ])('%s is a NoSpaceError naming the directory and what to do', (reason, err) => {
    expect(noSpaceCode(err)).toBe(reason);
    const mapped = asNoSpaceError(err, where);
    expect(mapped).toBeInstanceOf(NoSpaceError);
    expect(mapped).toMatchObject({
      code: 'AF_NO_SPACE',
      message: `no space left in the data directory /srv/af while creating a codebase (${reason}): free space on its filesystem, or discard sandbox changes and destroy sandboxes and codebases that are no longer needed, then retry`,
      details: { directory: '/srv/af', operation: 'creating a codebase', reason },
      cause: err,
    });
  });

  it('leaves everything else as it was', () => {
    for (const err of [
      errno('EACCES'),
      new ConflictError('in use', { cause: errno('ENOSPC') }),
      'a string',
      undefined,
    ]) {
      expect(asNoSpaceError(err, where)).toBe(err);
    }
    // A sandbox's own disk quota names the quota, not the data directory.
    const quota = fromWire({
      code: 'AF_NO_SPACE',
      message: "ENOSPC: /f: the sandbox's disk quota of 10 bytes is used up (10 used)",
      details: { quotaBytes: 10 },
    });
    expect(asNoSpaceError(quota, where)).toBe(quota);
    const named = asNoSpaceError(errno('ENOSPC'), where);
    expect(asNoSpaceError(named, { directory: '/other', operation: 'again' })).toBe(named);
  });

  it('tells an MCP client the same without the host path', () => {
    const result = errorResult(asNoSpaceError(errno('ENOSPC'), where));
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result)).not.toContain('/srv/af');
    expect(result.content).toEqual([
      {
        type: 'text',
        text: `error AF_NO_SPACE: ${noSpaceMessage({ operation: 'creating a codebase', reason: 'ENOSPC' })}`,
      },
    ]);
    expect(result.structuredContent).toMatchObject({
      error: {
        code: 'AF_NO_SPACE',
        message: expect.stringMatching(/^no space left in the data directory while/) as unknown,
      },
      details: { operation: 'creating a codebase', reason: 'ENOSPC' },
    });
  });
});
