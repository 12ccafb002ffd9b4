// The workspace a runtime binds at /workspace must be a directory the control plane can reach; both
// runtimes check it the same way at start, so a bad path is refused with one message before anything
// (cgroups, a container) is created.
import { stat } from 'node:fs/promises';
import { InvalidArgumentError } from '../errors.js';

/** Throws InvalidArgumentError unless `workspaceHostPath` is an accessible directory. */
export async function checkWorkspaceDir(workspaceHostPath: string): Promise<void> {
  const workspace = await stat(workspaceHostPath).catch((err: unknown) => {
    throw new InvalidArgumentError(
      `workspace ${workspaceHostPath} is not accessible: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  });
  if (!workspace.isDirectory()) {
    throw new InvalidArgumentError(`workspace ${workspaceHostPath} is not a directory`);
  }
}
