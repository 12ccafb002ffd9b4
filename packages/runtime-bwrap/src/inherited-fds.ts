// Descriptors this process inherited without close-on-exec (a parent that leaked a pipe, a socket or a
// file to the control plane) would pass into every sandboxed command: neither libuv nor bwrap closes a
// descriptor above the stdio it is given. Node opens its own descriptors close-on-exec, so one without the
// flag came from outside. Each bwrap spawn covers those positions with /dev/null (a stdio entry per
// position), so the command finds nothing of the host there.
//
// The list is read once per process (inherited descriptors exist from the start; reading /proc per exec
// would cost ~0.35 ms). Covering a position that was since closed and reused is harmless: the reused
// descriptor is close-on-exec and would not have reached the command anyway.
import { readdirSync, readFileSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;

let leaked: readonly number[] | undefined;

/** Inherited descriptors at or above `from` that lack close-on-exec, in ascending order. */
export function leakedDescriptors(from: number): readonly number[] {
  leaked ??= scan();
  return leaked.filter((fd) => fd >= from);
}

function scan(): number[] {
  const found: number[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return found; // no /proc: nothing can be checked (bwrap needs /proc anyway)
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < 3) continue;
    let info: string;
    try {
      info = readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1');
    } catch {
      continue; // the descriptor readdir itself used, already closed
    }
    const flags = /^flags:\s*([0-7]+)/m.exec(info);
    if (flags !== null && (parseInt(flags[1] ?? '0', 8) & O_CLOEXEC) === 0) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}
