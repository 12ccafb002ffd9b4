// The worker process: `node main.js --log-file F [--log-level L] [--name N]`, started by spawnWorker()
// with its control connection (a socketpair) on fd 3. It serves exactly one mount and exits when asked,
// when the control plane hangs up (so a dead control plane never leaves a worker behind), or on
// SIGTERM/SIGINT — unmounting first every time.
import { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { hostIo } from '@agentfense/fuse-native';
import { RpcPeer, createSocketTransport, serverHandshake } from '@agentfense/protocol';
import { takeCollector } from './worker/idle-trim.js';
import { LogFile, createWorkerLogger } from './worker/log.js';
import { WorkerService } from './worker/server.js';

const CONTROL_FD = 3;

function usage(message: string): never {
  process.stderr.write(
    `agentfense worker: ${message}\nusage: main.js --log-file FILE [--log-level L] [--name N]\n`,
  );
  process.exit(2);
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        'log-file': { type: 'string' },
        'log-level': { type: 'string', default: 'info' },
        name: { type: 'string' },
      },
      strict: true,
    }));
  } catch (err) {
    usage((err as Error).message);
  }
  const logFile = values['log-file'];
  if (logFile === undefined) usage('--log-file is required');
  const name = values.name ?? 'worker';
  process.title = `agentfense-worker ${name}`;

  const destination = new LogFile(logFile);
  const root = createWorkerLogger(destination, values['log-level'], { pid: process.pid });
  // A worker spawned ahead of time (the control plane's pool) learns its sandbox at mount: it then logs
  // to that sandbox's file, under its name.
  let logger = root.child({ sandbox: name });
  const socket = new Socket({ fd: CONTROL_FD, readable: true, writable: true });
  const transport = createSocketTransport(socket);
  await serverHandshake(transport, { info: { pid: process.pid } });
  const peer = new RpcPeer({ transport });
  const gc = takeCollector();
  // After each idle collection, glibc gives back the free pages of its heap too, those below the top included
  // (freeing returns only the top): what start-up, a mount or a burst allocated and freed stayed resident
  // otherwise, 3-7 MiB of an idle worker's ~10 (docs/decisions.md, "Quiet workers collect and trim their
  // heap").
  const collect =
    gc === undefined
      ? undefined
      : (): void => {
          gc();
          hostIo.mallocTrim();
        };
  const service = new WorkerService({
    peer,
    logger,
    ...(collect === undefined ? {} : { collect }),
    onAssigned: ({ logFile: file, name: assigned }) => {
      if (assigned !== undefined) {
        process.title = `agentfense-worker ${assigned}`;
        logger = root.child({ sandbox: assigned });
      }
      if (file !== undefined && file !== logFile) destination.reopen(file);
      return logger;
    },
  });
  // The V8 flags and the program (bundle or not) decide the worker's memory: say which this one runs.
  logger.info({ execArgv: process.execArgv, program: process.argv[1] }, 'worker ready');

  const exit = (reason: string, code: number): void => {
    void service.close(reason).finally(() => {
      logger.flush();
      peer.close();
      // Let the log and the last frames drain; nothing else may keep us alive after the unmount.
      setTimeout(() => process.exit(code), 20).unref();
    });
  };
  peer.onClose(() => exit('control connection closed', 0));
  process.once('SIGTERM', () => exit('SIGTERM', 0));
  process.once('SIGINT', () => exit('SIGINT', 0));
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception');
    exit('uncaught exception', 1);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(
    `agentfense worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
