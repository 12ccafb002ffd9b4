// How far the kernel reads ahead on our mount. The kernel's readahead of a FUSE file is capped by the
// mount's backing-device info (`/sys/class/bdi/0:<minor>/read_ahead_kb`, 128 KiB by default); the INIT
// reply's `max_readahead` can only lower it. So even with max_pages (1 MiB READ requests) a sequential
// reader of a large file got 128 KiB READs: 8,192 round trips per GiB. Raising the window to the request
// size makes them 1,024 READs of 1 MiB (bench/README.md: cold 1 GiB read, and the warm one, whose page
// cache is then filled in bigger folios). Every READ still reaches the worker's permission check; the
// window only changes how much of a file the kernel asks for at once, for files the sandbox opened.
import { readFile, writeFile } from 'node:fs/promises';
import { fuseMountsAt } from './mounts.js';

/** Sets the read-ahead window of the FUSE mount at `mountpoint` to `bytes`; the KiB set, or an Error. */
export async function widenReadahead(mountpoint: string, bytes: number): Promise<number | Error> {
  try {
    // Innermost mount at that path: ours, just mounted. FUSE superblocks are anonymous devices (major 0)
    // and the kernel names their bdi "<major>:<minor>" (fs/fuse/inode.c fuse_bdi_init).
    const mine = (await fuseMountsAt(mountpoint)).at(-1);
    if (mine === undefined) return new Error(`no FUSE mount at ${mountpoint}`);
    const file = `/sys/class/bdi/0:${mine.minor}/read_ahead_kb`;
    const kib = Math.floor(bytes / 1024);
    const current = Number((await readFile(file, 'utf8')).trim());
    if (current < kib) await writeFile(file, String(kib));
    return Math.max(current, kib);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}
