// Adapters between grpc-js's callback-shaped handlers and async functions: every handler is an async
// function that returns its reply (or writes its stream) and throws AgentFense errors; these turn that
// into the callback / stream end with a status, log unexpected failures, and give each call an
// AbortSignal that fires when the client cancels or the server shuts down.
import type {
  handleClientStreamingCall,
  handleServerStreamingCall,
  handleUnaryCall,
  ServerReadableStream,
  ServerUnaryCall,
  ServerWritableStream,
  ServiceError,
} from '@grpc/grpc-js';
import { status as Status } from '@grpc/grpc-js';
import type { Metadata } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { StreamBudget } from '../api/stream-budget.js';
import { toGrpcError } from './status.js';

/** What every call kind has (grpc-js does not export its own name for this). */
export interface SurfaceCall {
  readonly cancelled: boolean;
  readonly metadata: Metadata;
  /** The `:authority` the client addressed (`localhost:9000`). */
  getHost(): string;
  once(event: 'cancelled', listener: () => void): unknown;
}

/** What every handler gets besides its call. */
export interface HandlerContext {
  /** Aborts when the server shuts down (running commands end then). */
  readonly shutdown: AbortSignal;
  /** Checks the call's credentials; returns the error to end it with when they are wrong. */
  readonly authenticate: (call: SurfaceCall) => ServiceError | undefined;
  readonly logger?: Logger | undefined;
  /** Back-pressure of the server's streams (shared with the HTTP face under `serve`). */
  readonly streams: StreamBudget;
}

/** An AbortSignal for one call: client cancellation, deadline, or server shutdown. */
export function callSignal(call: SurfaceCall, shutdown: AbortSignal): AbortSignal {
  const controller = new AbortController();
  if (call.cancelled) controller.abort();
  call.once('cancelled', () => controller.abort());
  return AbortSignal.any([controller.signal, shutdown]);
}

function failure(context: HandlerContext, method: string, err: unknown): ServiceError {
  const error = toGrpcError(err);
  if (error.code === Status.INTERNAL) context.logger?.error({ err, method }, 'gRPC call failed');
  return error;
}

export function unary<Req, Res>(
  context: HandlerContext,
  method: string,
  handler: (request: Req, signal: AbortSignal, call: ServerUnaryCall<Req, Res>) => Promise<Res>,
): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const denied = context.authenticate(call);
    if (denied !== undefined) {
      callback(denied);
      return;
    }
    handler(call.request, callSignal(call, context.shutdown), call).then(
      (reply) => callback(null, reply),
      (err: unknown) => callback(failure(context, method, err)),
    );
  };
}

export function serverStream<Req, Res>(
  context: HandlerContext,
  method: string,
  handler: (request: Req, signal: AbortSignal, call: ServerWritableStream<Req, Res>) => Promise<void>,
): handleServerStreamingCall<Req, Res> {
  return (call) => {
    const denied = context.authenticate(call);
    if (denied !== undefined) {
      call.emit('error', denied);
      return;
    }
    handler(call.request, callSignal(call, context.shutdown), call).then(
      () => {
        if (!call.writableEnded) call.end();
      },
      (err: unknown) => call.emit('error', failure(context, method, err)),
    );
  };
}

export function clientStream<Req, Res>(
  context: HandlerContext,
  method: string,
  handler: (call: ServerReadableStream<Req, Res>, signal: AbortSignal) => Promise<Res>,
): handleClientStreamingCall<Req, Res> {
  return (call, callback) => {
    const denied = context.authenticate(call);
    if (denied !== undefined) {
      callback(denied);
      return;
    }
    handler(call, callSignal(call, context.shutdown)).then(
      (reply) => callback(null, reply),
      (err: unknown) => callback(failure(context, method, err)),
    );
  };
}
