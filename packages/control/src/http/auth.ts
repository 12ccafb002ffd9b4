// Bearer-token authentication and the loopback rule: a server without a token listens on loopback only.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { InvalidArgumentError } from '@agentfense/protocol';

/** Shortest token accepted: 128 bits of hex, so a guessable token is refused rather than trusted. */
export const MIN_TOKEN_LENGTH = 32;

/** Reads a token file: its content without surrounding whitespace, at least MIN_TOKEN_LENGTH characters. */
export async function readTokenFile(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new InvalidArgumentError(`cannot read the token file ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const token = text.trim();
  if (token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
    throw new InvalidArgumentError(
      `the token in ${file} must be one word of at least ${MIN_TOKEN_LENGTH} characters (e.g. \`openssl rand -hex 32\`)`,
    );
  }
  return token;
}

/**
 * Checks `Authorization: Bearer <token>` against the configured token in constant time: both sides are
 * hashed first, so the comparison never depends on (or leaks) the lengths or a common prefix.
 */
export class BearerAuth {
  readonly #digest: Buffer;

  constructor(token: string) {
    this.#digest = sha256(token);
  }

  /** True when the header carries the token. */
  check(header: string | undefined): boolean {
    const match = header === undefined ? null : /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    // Compare even without a usable header, so a missing token costs the same as a wrong one.
    const presented = sha256(match?.[1] ?? '');
    return timingSafeEqual(presented, this.#digest) && match !== null;
  }
}

/**
 * The check a server applies: a BearerAuth for its token, or undefined when it was explicitly told to serve
 * without one. Neither is an error, so a server is never open by omission.
 */
export function authOf(options: { token?: string; insecureNoAuth?: boolean }): BearerAuth | undefined {
  if (options.token !== undefined && options.insecureNoAuth === true) {
    throw new InvalidArgumentError('give either a token or insecureNoAuth: true, not both');
  }
  if (options.token !== undefined) return new BearerAuth(options.token);
  if (options.insecureNoAuth === true) return undefined;
  throw new InvalidArgumentError(
    'a server needs a token (e.g. `(await ensureApiToken(dataDir)).token`) or, to serve loopback without authentication, insecureNoAuth: true',
  );
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** A parsed `--listen` value. */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** Parses `host:port`, `[v6]:port`, `:port` or `port` (host default 127.0.0.1). */
export function parseListen(value: string): ListenAddress {
  const bad = (): never => {
    throw new InvalidArgumentError(
      `invalid --listen ${JSON.stringify(value)}: expected host:port, [ipv6]:port or port (e.g. 127.0.0.1:8080)`,
    );
  };
  const bare = /^(\d+)$/.exec(value);
  const match = bare === null ? /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d+)$/.exec(value) : null;
  if (bare === null && match === null) return bad();
  const v6 = match?.[1];
  const named = match?.[2];
  const host = v6 ?? (named === undefined || named === '' ? '127.0.0.1' : named);
  const port = Number(bare?.[1] ?? match?.[3]);
  if (!Number.isSafeInteger(port) || port > 65535) return bad();
  if (v6 !== undefined && isIP(v6) !== 6) return bad();
  return { host, port };
}

/** True for addresses that only this machine can reach: 127.0.0.0/8, ::1, ::ffff:127.x and `localhost`. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) {
    const lower = host.toLowerCase();
    return lower === '::1' || lower === '0:0:0:0:0:0:0:1' || /^::ffff:127\.\d+\.\d+\.\d+$/.test(lower);
  }
  return false;
}

/** Refuses to serve a non-loopback address without a token (anyone who can connect could run commands). */
export function assertListenAllowed(address: ListenAddress, hasToken: boolean): void {
  if (!hasToken && !isLoopback(address.host)) {
    throw new InvalidArgumentError(
      `refusing to listen on ${address.host} without authentication: anyone who can reach it could run commands; drop --insecure-no-auth (a token is then required) or listen on 127.0.0.1`,
    );
  }
}

/** The host part of a Host header value (`[::1]:8080` → `::1`, `localhost:8080` → `localhost`). */
function hostOfHeader(value: string): string | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::\d+)?$/.exec(value.trim());
  return match === null ? undefined : (match[1] ?? match[2])?.toLowerCase();
}

/**
 * DNS-rebinding defence for a server without a token: a web page on evil.example whose name was
 * re-pointed at 127.0.0.1 reaches our socket with `Host: evil.example` (and its own Origin), so only
 * loopback names are accepted in Host, and in Origin when a browser sends one. Returns why a request is
 * refused, or undefined when it may proceed.
 */
export function refuseNonLoopback(headers: {
  host?: string | undefined;
  origin?: string | undefined;
}): string | undefined {
  const host = headers.host === undefined ? undefined : hostOfHeader(headers.host);
  if (host === undefined || !isLoopback(host)) {
    return `Host ${JSON.stringify(headers.host ?? '')} is not a loopback name: a server without a token answers only requests addressed to localhost, 127.0.0.1 or [::1] (start it without --insecure-no-auth to serve other names)`;
  }
  if (headers.origin !== undefined) {
    let origin: string | undefined;
    try {
      origin = new URL(headers.origin).hostname.replace(/^\[|\]$/g, '').toLowerCase();
    } catch {
      origin = undefined;
    }
    if (origin === undefined || !isLoopback(origin)) {
      return `Origin ${JSON.stringify(headers.origin)} is not a loopback origin: a server without a token refuses requests from web pages of other sites`;
    }
  }
  return undefined;
}
