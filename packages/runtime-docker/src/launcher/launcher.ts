// The container's launcher: af-init (protocol's static binary) runs as the container's pid 1 and connects
// back to the host over a Unix socket the host listens on, in a per-container host directory bound
// read-only at LAUNCHER_DIR. Each exec is then a SPAWN on that connection (a fork+exec inside the
// container) instead of an engine exec (runc setns + a process through containerd's shim, ~36 ms here).
//
// The listener accepts exactly one connection, af-init's (nothing else runs in the container before it),
// then unlinks the socket and closes: nothing the agent starts later can connect to the host. Any other
// connection queued with af-init's is closed at once (and logged when the listener saw it). The
// directory's host parents are root-only (the sandbox's stateDir, the pool's owner directory), so no
// other local user can reach the socket either; inside the container only the sandbox's gid can.
// af-init's argv names only paths inside the container; its environment is the container's.
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { rmSync } from 'node:fs';
import { chmod, chown, copyFile, mkdir, open, readdir, rm } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { Socket } from 'node:net';
import { posix } from 'node:path';
import { LauncherClient, afInitPath } from '@agentfense/launcher';
import { UnavailableError } from '@agentfense/protocol';
import type { EngineApi } from '../engine/api.js';
import { containerEnv } from '../container/containers.js';
import type { RuntimeLogger } from '../logger.js';

/** Prefix of launcher directories on the host (in a stateDir's docker scratch dir or a pool owner dir). */
export const LAUNCHER_DIR_PREFIX = 'launcher-';
/** How long af-init gets to connect and say READY after the container was started. */
const CONNECT_TIMEOUT_MS = 30_000;

/** A listening launcher directory, before and after its container's af-init connected. */
export interface LauncherListener {
  /** The host directory to bind read-only at LAUNCHER_DIR. */
  readonly dir: string;
  /**
   * Resolves once af-init connected and said READY (after the container was started); rejects with
   * UnavailableError if it does not within CONNECT_TIMEOUT_MS of `arm()`.
   */
  readonly client: Promise<LauncherClient>;
  /** Starts the connect timeout (call once the container was started). */
  arm(): void;
  /** Closes the listener and the connection (af-init then kills everything and exits), removes the directory. */
  release(): Promise<void>;
}

/**
 * Creates `<parent>/launcher-<uuid>` holding a copy of af-init and a listening socket that the
 * container's user (`uid:gid`) may connect to once.
 */
export async function listenForLauncher(options: {
  readonly parent: string;
  /** The container's `uid:gid`. */
  readonly user: string;
  readonly logger: RuntimeLogger;
}): Promise<LauncherListener> {
  const { parent, user, logger } = options;
  const gid = Number(user.split(':')[1]);
  const dir = posix.join(parent, `${LAUNCHER_DIR_PREFIX}${randomUUID()}`);
  const sock = posix.join(dir, 'sock');
  await mkdir(parent, { recursive: true, mode: 0o700 });
  await mkdir(dir, { mode: 0o700 });
  const server = createServer();
  let accepted: Socket | undefined;
  let client: LauncherClient | undefined;
  let timer: NodeJS.Timeout | undefined;
  let settle!: { resolve: (c: LauncherClient) => void; reject: (e: Error) => void };
  const connected = new Promise<LauncherClient>((resolve, reject) => (settle = { resolve, reject }));
  connected.catch(() => undefined);
  let dirFd: FileHandle | undefined;
  const closeServer = (): void => {
    if (server.listening) server.close();
    else void dirFd?.close().catch(() => undefined);
    void rm(sock, { force: true });
  };
  // Every connection the listener accepts is handled: the first is af-init's, any other is closed at once
  // and logged (nothing else should exist this early). The socket file goes with the first connection, so
  // nobody can connect afterwards; the listener itself stays open until af-init's READY, accepting (one
  // per event-loop turn) and refusing whatever was queued with af-init's connection. Whatever is still
  // queued when it closes is reset by the kernel: refused too, only not logged.
  server.on('connection', (socket) => {
    if (accepted !== undefined) {
      socket.destroy();
      logger.warn(
        { dir },
        'refused a second connection to the container launcher: only af-init connects, once',
      );
      return;
    }
    accepted = socket;
    rmSync(sock, { force: true });
    LauncherClient.connect(socket, { readyTimeoutMs: CONNECT_TIMEOUT_MS }).then(
      (c) => {
        clearTimeout(timer);
        closeServer();
        client = c;
        settle.resolve(c);
      },
      (err: Error) => {
        clearTimeout(timer);
        closeServer();
        settle.reject(err);
      },
    );
  });
  server.on('error', (err) =>
    settle.reject(new UnavailableError(`the launcher socket failed: ${err.message}`)),
  );
  try {
    await copyFile(afInitPath(), posix.join(dir, 'af-init'));
    await chmod(posix.join(dir, 'af-init'), 0o755);
    // A Unix socket's path is limited to 107 bytes and a data directory's can be longer: bind through
    // the directory's descriptor (/proc/self/fd/N/sock, resolved by the kernel) instead.
    dirFd = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(`/proc/self/fd/${String(dirFd?.fd)}/sock`, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // libuv unlinks the path it bound when the server closes: the descriptor must name our directory
    // until then (a reused number could name another directory), so it is closed only after the server.
    server.once('close', () => void dirFd?.close().catch(() => undefined));
    // The container's user needs search on the directory and write on the socket; nobody else any.
    await chmod(sock, 0o660);
    await chown(sock, 0, gid);
    await chown(dir, 0, gid);
    await chmod(dir, 0o710);
  } catch (err) {
    closeServer();
    await rm(dir, { recursive: true, force: true });
    throw new UnavailableError(
      `could not prepare the container's launcher in ${dir}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  let released: Promise<void> | undefined;
  return {
    dir,
    client: connected,
    arm: () => {
      timer ??= setTimeout(() => {
        closeServer();
        settle.reject(
          new UnavailableError(
            `the container's launcher (af-init) did not connect within ${CONNECT_TIMEOUT_MS} ms`,
          ),
        );
      }, CONNECT_TIMEOUT_MS);
      timer.unref();
    },
    release: () =>
      (released ??= (async () => {
        clearTimeout(timer);
        closeServer();
        settle.reject(new UnavailableError("the container's launcher was released"));
        client?.close();
        accepted?.destroy();
        await rm(dir, { recursive: true, force: true });
      })()),
  };
}

/** Removes launcher directories a crashed control plane left in `parent` (never mounts: plain files). */
export async function clearLauncherDirs(parent: string): Promise<void> {
  for (const entry of await readdir(parent).catch(() => [] as string[])) {
    if (entry.startsWith(LAUNCHER_DIR_PREFIX)) {
      await rm(posix.join(parent, entry), { recursive: true, force: true });
    }
  }
}

/** A container's connected launcher: what DockerInstance uses. */
export interface Launcher {
  readonly listener: LauncherListener;
  readonly client: LauncherClient;
  /** The environment an engine exec would start from (containerEnv): af-init adds nothing. */
  readonly env: Readonly<Record<string, string>>;
}

/** Waits for af-init's READY and reads the container's environment (both needed for the first exec). */
export async function connectLauncher(
  api: EngineApi,
  containerId: string,
  listener: LauncherListener,
): Promise<Launcher> {
  const [client, env] = await Promise.all([listener.client, containerEnv(api, containerId)]);
  return { listener, client, env };
}
