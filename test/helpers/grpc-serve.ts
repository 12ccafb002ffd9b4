// `agentfense serve` with its gRPC face on an ephemeral loopback port (HTTP too, also ephemeral), over a
// fresh data directory; stopped and leak-checked when the test finishes (test/helpers/http-fixture.ts).
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { launchServer, scratch, stopAndCheck, type Served } from './http-fixture.js';
import { grpcClient, type GrpcClient } from './grpc-client.js';

export interface GrpcServed {
  readonly served: Served;
  /** `127.0.0.1:port` of the gRPC listener. */
  readonly target: string;
  /** A client (closed when the test finishes), with the server's token unless given one (null: none). */
  client(token?: string | null): GrpcClient;
}

export async function startGrpcServer(args: readonly string[] = []): Promise<GrpcServed> {
  const served = await launchServer(
    ['--grpc-listen', '127.0.0.1:0', ...args],
    join(await scratch('af-grpc-'), 'data'),
  );
  onTestFinished(async () => {
    await stopAndCheck(served);
  });
  const match = /grpc:\/\/(\S+) /.exec(served.output());
  if (match === null) throw new Error(`no gRPC address in: ${served.output()}`);
  const target = match[1] as string;
  return {
    served,
    target,
    client: (token) => {
      const c = grpcClient(target, token === null ? undefined : (token ?? served.token));
      onTestFinished(() => c.close());
      return c;
    },
  };
}
