// Descriptors this process inherited without close-on-exec (a parent that leaked a pipe, a socket or a
// file to the control plane) would pass into every sandboxed command: neither libuv nor bwrap closes a
// descriptor above the stdio it is given. Node opens its own descriptors close-on-exec, so one without the
// flag came from outside. Each bwrap spawn covers those positions with /dev/null (a stdio entry per
// position), so the command finds nothing of the host there.
//
// The list is read once per process (inherited descriptors exist from the start; reading /proc per exec
// would cost ~0.35 ms). Covering a position that was since closed and reused is harmless: the reused
// descriptor is close-on-exec and would not have reached the command anyway.
import { descriptorsWithoutCloseOnExec } from '@agentfense/protocol/fds';

let leaked: readonly number[] | undefined;

/** Inherited descriptors at or above `from` that lack close-on-exec, in ascending order. */
export function leakedDescriptors(from: number): readonly number[] {
  leaked ??= descriptorsWithoutCloseOnExec();
  return leaked.filter((fd) => fd >= from);
}
