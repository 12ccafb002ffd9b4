// Clearing mounts a tool left behind under a directory (debootstrap's /proc in a root filesystem, dockerd's
// netns bind under its exec root), so the directory can be removed or reused without crossing into them.
import { readFile } from 'node:fs/promises';
import { execa } from 'execa';

/**
 * Lazily unmounts every mount strictly below `dir` (and at `dir` itself with `inclusive`), deepest first;
 * resolves the mount points it cleared.
 */
export async function unmountBelow(dir: string, options: { inclusive?: boolean } = {}): Promise<string[]> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const targets = mountinfo
    .split('\n')
    .map((line) =>
      (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) =>
        String.fromCharCode(parseInt(o, 8)),
      ),
    )
    .filter((target) => target.startsWith(`${dir}/`) || (options.inclusive === true && target === dir))
    .sort((a, b) => b.length - a.length);
  // Once per line, not per path: mounts stacked on one point (a bind with a propagated mount on top of it)
  // each need their own umount.
  for (const target of targets) await execa('umount', ['--lazy', target], { reject: false });
  return [...new Set(targets)];
}
