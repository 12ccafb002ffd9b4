// A real gRPC client of `agentfense serve` for the tests, built the way the original's Python SDK is:
// from the .proto files alone (@grpc/proto-loader + @grpc/grpc-js, independent of the server's generated
// code), with snake_case field names as the SDK writes them. Calls are promisified; errors keep their
// gRPC status code.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as loader from '@grpc/proto-loader';

const protoRoot = fileURLToPath(new URL('../../packages/control/proto', import.meta.url));

export { status } from '@grpc/grpc-js';

// Messages are plain objects with the .proto's field names; tests index into them freely.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Message = any;

export interface StreamResult {
  readonly messages: Message[];
  readonly trailers: grpc.Metadata | undefined;
}

export interface GrpcClient {
  /** A unary call: `unary('sandbox', 'Exec', {...})`. */
  unary(service: 'sandbox' | 'codebase', method: string, request: Message): Promise<Message>;
  /** A server-streaming call, collected. */
  stream(service: 'sandbox' | 'codebase', method: string, request: Message): Promise<StreamResult>;
  /**
   * A server-streaming call left unread (paused: nothing is consumed until the caller reads or resumes
   * it), as a client that stops reading holds it; cancelled when the client closes.
   */
  open(service: 'sandbox' | 'codebase', method: string, request: Message): grpc.ClientReadableStream<Message>;
  /** UploadFiles with these messages in order. */
  upload(messages: readonly Message[]): Promise<Message>;
  /**
   * UploadFiles that sends these messages, then cancels the call instead of ending it (as a client that
   * gives up does); resolves with the status code the client saw.
   */
  cancelUpload(messages: readonly Message[]): Promise<number>;
  close(): void;
}

function load(): { sandbox: grpc.ServiceClientConstructor; codebase: grpc.ServiceClientConstructor } {
  const definition = loader.loadSync(['sandbox/v1/sandbox.proto', 'sandbox/v1/codebase.proto'], {
    includeDirs: [protoRoot, '/usr/include'],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    sandbox: { v1: Record<string, grpc.ServiceClientConstructor> };
  };
  return {
    sandbox: pkg.sandbox.v1.SandboxService as grpc.ServiceClientConstructor,
    codebase: pkg.sandbox.v1.CodebaseService as grpc.ServiceClientConstructor,
  };
}

/**
 * A client of `target` (`host:port`), sending `authorization: Bearer <token>` when a token is given, and
 * `authority` as the `:authority` of its calls when given (a rebinding page's name).
 */
export function grpcClient(target: string, token?: string, authority?: string): GrpcClient {
  const ctors = load();
  const options = authority === undefined ? {} : { 'grpc.default_authority': authority };
  const clients = {
    sandbox: new ctors.sandbox(target, grpc.credentials.createInsecure(), options),
    codebase: new ctors.codebase(target, grpc.credentials.createInsecure(), options),
  };
  const metadata = (): grpc.Metadata => {
    const m = new grpc.Metadata();
    if (token !== undefined) m.set('authorization', `Bearer ${token}`);
    return m;
  };
  type Method = (...args: unknown[]) => unknown;
  const method = (service: 'sandbox' | 'codebase', name: string): Method => {
    const client = clients[service] as unknown as Record<string, unknown>;
    const fn = client[name];
    if (typeof fn !== 'function') throw new Error(`no method ${service}.${name}`);
    return (fn as Method).bind(client);
  };
  return {
    unary: (service, name, request) =>
      new Promise((resolve, reject) => {
        method(service, name)(request, metadata(), (err: grpc.ServiceError | null, reply: Message) =>
          err === null ? resolve(reply) : reject(err),
        );
      }),
    stream: (service, name, request) =>
      new Promise((resolve, reject) => {
        const call = method(service, name)(request, metadata()) as grpc.ClientReadableStream<Message>;
        const messages: Message[] = [];
        let trailers: grpc.Metadata | undefined;
        call.on('data', (m: Message) => messages.push(m));
        call.on('status', (s: grpc.StatusObject) => (trailers = s.metadata));
        call.on('error', reject);
        call.on('end', () => setImmediate(() => resolve({ messages, trailers })));
      }),
    open: (service, name, request) => {
      const call = method(service, name)(request, metadata()) as grpc.ClientReadableStream<Message>;
      call.pause();
      // One read starts grpc-js's flow control: until a call's first read, grpc-js keeps taking its
      // messages from the connection into a list of its own without bound, so the server would see a
      // client that reads everything.
      call.read(0);
      // Its end is for the caller to observe; an error nobody listens to must not fail the test run.
      call.on('error', () => undefined);
      return call;
    },
    upload: (messages) =>
      new Promise((resolve, reject) => {
        const call = method('codebase', 'UploadFiles')(
          metadata(),
          (err: grpc.ServiceError | null, reply: Message) => (err === null ? resolve(reply) : reject(err)),
        ) as grpc.ClientWritableStream<Message>;
        for (const m of messages) call.write(m);
        call.end();
      }),
    cancelUpload: (messages) =>
      new Promise((resolve) => {
        const call = method('codebase', 'UploadFiles')(metadata(), (err: grpc.ServiceError | null) =>
          resolve(err === null ? grpc.status.OK : err.code),
        ) as grpc.ClientWritableStream<Message>;
        // Cancelled once every message was handed to the connection: the server gets them, then the reset.
        let pending = messages.length;
        if (pending === 0) call.cancel();
        for (const m of messages) call.write(m, () => (--pending === 0 ? call.cancel() : undefined));
      }),
    close: () => {
      clients.sandbox.close();
      clients.codebase.close();
    },
  };
}

/** The gRPC status code a promise rejects with (fails the test when it resolves). */
export async function codeOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
  } catch (err) {
    return (err as grpc.ServiceError).code;
  }
  throw new Error('expected the call to fail');
}

/** UploadFiles messages for one file: metadata, then ≤ 64 KiB chunks, as the SDK sends them. */
export function uploadMessages(
  codebaseId: string,
  path: string,
  content: Buffer,
  chunk = 64 * 1024,
): Message[] {
  const out: Message[] = [
    { metadata: { codebase_id: codebaseId, file_path: path, total_size: content.length } },
  ];
  for (let at = 0; at < content.length; at += chunk) out.push({ data: content.subarray(at, at + chunk) });
  return out;
}
