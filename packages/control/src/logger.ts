// The control plane's root logger: JSON lines (pino) to logs/control.log under the data directory.
import { pino } from 'pino';
import type { Level, Logger } from 'pino';

/** One root logger per ControlPlane; components use `child({ component })`, sandboxes `child({ sandboxId })`. */
export function createControlLogger(options: { file: string; level?: Level | undefined }): Logger {
  // Synchronous writes: the log is small, and lines must survive a crash of the process that wrote them.
  return pino(
    { level: options.level ?? 'info', base: { pid: process.pid, component: 'control' } },
    pino.destination({ dest: options.file, mkdir: true, sync: true }),
  );
}
