// The control plane's root logger: JSON lines (pino) to logs/control.log under the data directory.
import { pino } from 'pino';
import type { Level, Logger } from 'pino';
import { SafeLogFile } from './log-destination.js';

/** One root logger per ControlPlane; components use `child({ component })`, sandboxes `child({ sandboxId })`. */
export function createControlLogger(options: { file: string; level?: Level | undefined }): Logger {
  // Synchronous writes: the log is small, and lines must survive a crash of the process that wrote them.
  // A line that cannot be written (a full filesystem) is dropped, never thrown at the code that logged.
  return pino(
    { level: options.level ?? 'info', base: { pid: process.pid, component: 'control' } },
    new SafeLogFile({ path: options.file }),
  );
}
