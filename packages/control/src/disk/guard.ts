// How the control plane touches a data directory that may be full: an operation that fails for lack of
// room answers a NoSpaceError naming the directory (`writing`), and an operation that frees room runs
// with the reserve's room at its disposal (`freeing`), so a full data directory can always be emptied.
import type { Logger } from 'pino';
import type { DataLayout } from '../paths.js';
import { asNoSpaceError } from './no-space.js';
import { SpaceReserve } from './reserve.js';

export class DiskGuard {
  readonly #root: string;
  readonly reserve: SpaceReserve;

  constructor(options: { readonly layout: DataLayout; readonly logger: Logger }) {
    this.#root = options.layout.root;
    this.reserve = new SpaceReserve({
      file: options.layout.spaceReserve,
      database: options.layout.database,
      logger: options.logger,
    });
  }

  /** Runs `work`; a failure for lack of room becomes a NoSpaceError saying it happened while `operation`. */
  async writing<T>(operation: string, work: () => T | Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw asNoSpaceError(err, { directory: this.#root, operation });
    }
  }

  /** `writing`, for an operation that frees room: on a (nearly) full filesystem the reserve is released first. */
  freeing<T>(operation: string, work: () => Promise<T>): Promise<T> {
    return this.writing(operation, () => this.reserve.freeing(work));
  }
}
