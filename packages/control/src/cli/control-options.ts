// The `--data DIR` option shared by every command that opens the control plane, and opening it.
import type { Command } from 'commander';
import type { ControlPlane } from '../control-plane.js';
import type { ControlPlaneOptions } from '../control-plane-options.js';

export interface DataFlags {
  readonly data?: string;
}

/** Adds `--data <dir>` to a command. */
export function addDataOption(command: Command): Command {
  return command.option(
    '--data <dir>',
    'the data directory (default $AGENTFENSE_DATA_DIR, else ~/.local/share/agentfense)',
  );
}

/** Opens the control plane of the selected data directory. */
export async function openControlPlane(
  flags: DataFlags,
  options: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  // Loaded here, not at the top: commands that never open it (help, explain, presets) skip its modules.
  const { ControlPlane } = await import('../control-plane.js');
  return ControlPlane.open({ ...options, ...(flags.data === undefined ? {} : { dataDir: flags.data }) });
}

/** Runs `work` with the control plane of the selected data directory, closing it afterwards. */
export async function withControlPlane<T>(
  flags: DataFlags,
  work: (plane: ControlPlane) => Promise<T> | T,
  options: ControlPlaneOptions = {},
): Promise<T> {
  const plane = await openControlPlane(flags, options);
  try {
    return await work(plane);
  } finally {
    await plane.close();
  }
}
