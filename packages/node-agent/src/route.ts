// One route of the agent's HTTP face: method, path pattern (its groups are the handler's params), handler.
import type { IncomingMessage, ServerResponse } from 'node:http';

export type Handler = (ctx: {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly params: readonly string[];
  readonly query: URLSearchParams;
}) => Promise<void>;

export type Route = [method: string, pattern: RegExp, handler: Handler];
