// The shared status mapping: every error kind has a gRPC code, and HTTP statuses follow grpc-gateway's
// runtime.HTTPStatusFromCode table (the values a gateway client sees).
import {
  ConflictError,
  ERROR_CODES,
  InternalError,
  NoSpaceError,
  NotFoundError,
  TimeoutError,
  WrongStateError,
} from '@agentfense/protocol';
import { describe, expect, it } from 'vitest';
import { GRPC_CODE_OF_ERROR, GrpcCode, httpStatusFromGrpcCode, statusOf } from '../src/api/status.js';

describe('api status mapping', () => {
  it('follows grpc-gateway HTTPStatusFromCode', () => {
    const table: [number, number][] = [
      [0, 200],
      [1, 499],
      [2, 500],
      [3, 400],
      [4, 504],
      [5, 404],
      [6, 409],
      [7, 403],
      [8, 429],
      [9, 400],
      [10, 409],
      [11, 400],
      [12, 501],
      [13, 500],
      [14, 503],
      [15, 500],
      [16, 401],
      [99, 500],
    ];
    for (const [code, status] of table) expect([code, httpStatusFromGrpcCode(code)]).toEqual([code, status]);
  });

  it("gives every error kind a code, with the original's choices", () => {
    for (const code of ERROR_CODES) expect(GRPC_CODE_OF_ERROR[code]).toBeTypeOf('number');
    expect(statusOf(new NotFoundError('x'))).toMatchObject({ grpcCode: 5, httpStatus: 404, message: 'x' });
    expect(statusOf(new WrongStateError('x'))).toMatchObject({ grpcCode: 9, httpStatus: 400 });
    expect(statusOf(new TimeoutError('x'))).toMatchObject({ grpcCode: 4, httpStatus: 504 });
    expect(statusOf(new ConflictError('x'))).toMatchObject({ grpcCode: GrpcCode.ABORTED, httpStatus: 409 });
    // A full filesystem: RESOURCE_EXHAUSTED, and 507 rather than the gateway's 429 (no retry helps).
    expect(statusOf(new NoSpaceError('full'))).toMatchObject({
      errorCode: 'AF_NO_SPACE',
      grpcCode: GrpcCode.RESOURCE_EXHAUSTED,
      httpStatus: 507,
      message: 'full',
    });
  });

  it('hides internal messages', () => {
    expect(statusOf(new InternalError('/secret/path broke')).message).not.toContain('secret');
    expect(statusOf(new Error('/secret/path'))).toMatchObject({ grpcCode: 13, httpStatus: 500 });
    expect(statusOf(new Error('/secret/path')).message).not.toContain('secret');
  });
});
