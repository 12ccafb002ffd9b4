// The API token of a data directory: `agentfense serve` requires a bearer token unless told otherwise, and
// without --token-file it uses the one in <data>/api-token, made on first start (256 random bits, hex,
// mode 0600 in the 0700 data directory). Clients of the same user (the CLI's session commands, a library
// user) read it from there; other local users cannot, which is the point: loopback is not a boundary
// between the users of one host. The token itself is never logged or printed.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, open, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import { MIN_TOKEN_LENGTH } from './auth.js';

/** The token's file name in the data directory. */
export const API_TOKEN_FILE = 'api-token';

/** Where the data directory's API token is. */
export function apiTokenPath(dataDir: string): string {
  return join(dataDir, API_TOKEN_FILE);
}

/**
 * The data directory's token, made if there is none. It is written whole under a temporary name and
 * linked into place (link(2) never replaces a file): two servers starting at once agree on one token, and
 * no reader ever sees a half-written file. A symlink planted at the name is refused when read.
 */
export async function ensureApiToken(
  dataDir: string,
): Promise<{ readonly token: string; readonly file: string; readonly created: boolean }> {
  const file = apiTokenPath(dataDir);
  const existing = await readApiToken(dataDir);
  if (existing !== undefined) return { token: existing, file, created: false };
  const token = randomBytes(32).toString('hex');
  const temporary = `${file}.${randomBytes(8).toString('hex')}`;
  const handle = await open(
    temporary,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    await handle.writeFile(`${token}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temporary, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const winner = await readApiToken(dataDir);
    if (winner === undefined) throw new InvalidArgumentError(`${file} cannot be read`, { cause: err });
    return { token: winner, file, created: false };
  } finally {
    await unlink(temporary);
  }
  return { token, file, created: true };
}

/**
 * Reads the data directory's token; undefined when there is none or this user may not read it (another
 * user's server: the server's 401 then says what is missing). A token file that is not a regular file of
 * this user, or that others may read or write, is refused: its token could be known or replaced.
 */
export async function readApiToken(dataDir: string): Promise<string | undefined> {
  const file = apiTokenPath(dataDir);
  let handle: FileHandle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EACCES') return undefined;
    if (code === 'ELOOP') throw new InvalidArgumentError(`${file} is a symlink; remove it`, { cause: err });
    throw err;
  }
  try {
    const st = await handle.stat();
    const uid = process.getuid?.() ?? 0;
    if (!st.isFile() || st.uid !== uid || (st.mode & 0o077) !== 0) {
      throw new InvalidArgumentError(
        `${file} must be a regular file of uid ${uid} that only its owner may read (mode 0600; it is ${(st.mode & 0o7777).toString(8)}, uid ${st.uid}): remove it and a new token is made at the next \`agentfense serve\``,
      );
    }
    const token = (await handle.readFile('utf8')).trim();
    if (token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
      throw new InvalidArgumentError(
        `${file} does not hold a token (one word of at least ${MIN_TOKEN_LENGTH} characters): remove it and a new one is made at the next \`agentfense serve\``,
      );
    }
    return token;
  } finally {
    await handle.close();
  }
}
