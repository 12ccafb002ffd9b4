// The gRPC face's pure parts: ids (the original's format is NOT_FOUND), Durations both ways, exit codes of
// signalled commands, rules and resources from proto3 messages (zero = unset), and statuses from the
// shared table with our code in the trailers.
import { InvalidArgumentError, NotFoundError, TimeoutError, WrongStateError } from '@agentfense/protocol';
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import {
  codebasePath,
  durationMs,
  exitCode,
  requestId,
  resourcesFromProto,
  rulesFromProto,
  toDuration,
} from '../src/grpc/convert.js';
import { PatternType, Permission } from '../src/grpc/gen/sandbox/v1/common.js';
import { ERROR_CODE_KEY, toGrpcError } from '../src/grpc/status.js';

describe('gRPC conversions', () => {
  it('takes our ids, answers NOT_FOUND for any other (the original format too) and requires one', () => {
    const ours = 'sb_00000000-0000-4000-8000-000000000000';
    expect(requestId('sandbox', 'sandbox_id', ours)).toBe(ours);
    expect(() => requestId('sandbox', 'sandbox_id', 'sb_0123456789abcdef')).toThrow(NotFoundError);
    expect(() => requestId('session', 'session_id', 'sess_0123456789abcdef')).toThrow(NotFoundError);
    expect(() => requestId('codebase', 'codebase_id', 'cb_0123456789abcdef')).toThrow(NotFoundError);
    expect(() => requestId('sandbox', 'sandbox_id', '')).toThrow(/sandbox_id is required/);
    expect(() => requestId('sandbox', 'sandbox_id', '')).toThrow(InvalidArgumentError);
    expect(() => requestId('sandbox', 'sandbox_id', 'sb_0123456789ABCDEF')).toThrow(NotFoundError);
    expect(() => requestId('sandbox', 'sandbox_id', '../x')).toThrow(NotFoundError);
  });

  it('reads Durations (zero = none, sub-millisecond rounds up, negative refused) and writes them', () => {
    expect(durationMs('timeout', undefined)).toBeUndefined();
    expect(durationMs('timeout', { seconds: 0, nanos: 0 })).toBeUndefined();
    expect(durationMs('timeout', { seconds: 1, nanos: 500_000_000 })).toBe(1500);
    expect(durationMs('timeout', { seconds: 0, nanos: 1 })).toBe(1);
    expect(() => durationMs('timeout', { seconds: -1, nanos: 0 })).toThrow(/timeout must be a non-negative/);
    expect(toDuration(1234.5)).toEqual({ seconds: 1, nanos: 234_500_000 });
  });

  it('reports a signalled command as 128 + the signal number', () => {
    expect(exitCode(3, null)).toBe(3);
    expect(exitCode(null, 'SIGKILL')).toBe(137);
    expect(exitCode(null, 'SIGTERM')).toBe(143);
    expect(exitCode(null, null)).toBe(-1);
  });

  it('converts rules and resources, refusing what proto3 cannot mean', () => {
    expect(
      rulesFromProto([
        {
          pattern: '**/*',
          type: PatternType.PATTERN_TYPE_GLOB,
          permission: Permission.PERMISSION_READ,
          priority: 0,
        },
        {
          pattern: '/secrets/',
          type: PatternType.PATTERN_TYPE_UNSPECIFIED,
          permission: Permission.PERMISSION_NONE,
          priority: 100,
        },
      ]),
    ).toEqual([
      { pattern: '**/*', type: 'glob', permission: 'read' },
      { pattern: '/secrets/', permission: 'none', priority: 100 },
    ]);
    expect(() =>
      rulesFromProto([
        {
          pattern: 'x',
          type: PatternType.PATTERN_TYPE_GLOB,
          permission: Permission.PERMISSION_UNSPECIFIED,
          priority: 0,
        },
      ]),
    ).toThrow(/permissions\[0\]\.permission/);
    expect(resourcesFromProto({ memoryBytes: 0, cpuQuota: 50_000, cpuShares: 0, pidsLimit: 64 })).toEqual({
      cpuQuota: 50_000,
      pidsLimit: 64,
    });
    expect(resourcesFromProto({ memoryBytes: 0, cpuQuota: 0, cpuShares: 0, pidsLimit: 0 })).toBeUndefined();
    expect(() => resourcesFromProto({ memoryBytes: -1, cpuQuota: 0, cpuShares: 0, pidsLimit: 0 })).toThrow(
      /resources.memory_bytes/,
    );
  });

  it('takes codebase paths as the SDK sends them', () => {
    expect(codebasePath('src/a.py')).toBe('src/a.py');
    expect(codebasePath('/src/a.py')).toBe('src/a.py');
    expect(codebasePath('/workspace/src/a.py')).toBe('src/a.py');
    expect(codebasePath('/workspace')).toBe('');
    expect(codebasePath('/workspaces/a')).toBe('workspaces/a');
  });

  it('maps errors to the shared codes with ours in the trailers, hiding internals', () => {
    const timeout = toGrpcError(new TimeoutError('command timed out after 1s'));
    expect([timeout.code, timeout.details]).toEqual([status.DEADLINE_EXCEEDED, 'command timed out after 1s']);
    expect(timeout.metadata?.get(ERROR_CODE_KEY)).toEqual(['AF_TIMEOUT']);
    expect(toGrpcError(new WrongStateError('x')).code).toBe(status.FAILED_PRECONDITION);
    expect(toGrpcError(new NotFoundError('x')).code).toBe(status.NOT_FOUND);
    const internal = toGrpcError(new Error('/secret/path'));
    expect(internal.code).toBe(status.INTERNAL);
    expect(internal.details).not.toContain('secret');
  });
});
