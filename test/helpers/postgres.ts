// A private PostgreSQL cluster for one test file: initdb into a temporary directory as the unprivileged
// `postgres` user (scripts/setup installs the Debian package), listening only on a Unix socket in that
// directory, with one database and one role that logs in with a password. stop() ends the server and
// removes the directory; start() cleans up after itself when a step fails.
import { randomBytes } from 'node:crypto';
import { appendFile, chown, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';

export interface PostgresCluster {
  /** `postgresql://af:<password>@<socket dir>/agentfense` (the role owns the database). */
  readonly url: string;
  /** The role's password (tests check it never shows). */
  readonly password: string;
  /** The socket directory (the URL's host). */
  readonly dir: string;
  /** Stops the server (immediately) and removes its directory. */
  stop(): Promise<void>;
}

const ROLE = 'af';
const DATABASE = 'agentfense';

/** The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<major>/bin). */
async function binDir(): Promise<string> {
  const majors = (await readdir('/usr/lib/postgresql').catch(() => [] as string[]))
    .filter((name) => /^\d+$/.test(name))
    .sort((a, b) => Number(b) - Number(a));
  if (majors[0] === undefined) {
    throw new Error('PostgreSQL is not installed (/usr/lib/postgresql/<major>/bin): run scripts/setup');
  }
  return `/usr/lib/postgresql/${majors[0]}/bin`;
}

/** Runs a PostgreSQL program as the `postgres` user (initdb and the server refuse root). */
function asPostgres(bin: string, program: string, args: readonly string[]) {
  return execa('runuser', ['-u', 'postgres', '--', join(bin, program), ...args], { all: true });
}

export async function startPostgres(): Promise<PostgresCluster> {
  const bin = await binDir();
  const dir = await mkdtemp(join(tmpdir(), 'af-pg-'));
  const data = join(dir, 'data');
  const password = randomBytes(12).toString('hex');
  let started = false;
  const stop = async (): Promise<void> => {
    if (started)
      await asPostgres(bin, 'pg_ctl', ['stop', '-D', data, '-m', 'immediate', '-w']).catch(() => undefined);
    started = false;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await chown(dir, ...(await postgresIds()));
    await asPostgres(bin, 'initdb', [
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--locale=C',
      '-N',
    ]);
    // The role logs in with its password; the superuser (set-up only) is trusted on the socket.
    await writeFile(join(data, 'pg_hba.conf'), `local all ${ROLE} scram-sha-256\nlocal all all trust\n`);
    await appendFile(
      join(data, 'postgresql.conf'),
      `listen_addresses = ''\nunix_socket_directories = '${dir}'\nfsync = off\n`,
    );
    await asPostgres(bin, 'pg_ctl', ['start', '-D', data, '-l', join(dir, 'server.log'), '-w']);
    started = true;
    const psql = (sql: string) =>
      execa(join(bin, 'psql'), [
        '-h',
        dir,
        '-U',
        'postgres',
        '-d',
        'postgres',
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        sql,
      ]);
    await psql(`CREATE ROLE ${ROLE} LOGIN PASSWORD '${password}'`);
    await psql(`CREATE DATABASE ${DATABASE} OWNER ${ROLE}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `postgresql://${ROLE}:${password}@${encodeURIComponent(dir)}/${DATABASE}`,
    password,
    dir,
    stop,
  };
}

async function postgresIds(): Promise<[number, number]> {
  const { stdout } = await execa('id', ['-u', 'postgres']);
  const { stdout: gid } = await execa('id', ['-g', 'postgres']);
  return [Number(stdout), Number(gid)];
}
