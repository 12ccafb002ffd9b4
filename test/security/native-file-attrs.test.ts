// Attack: get a GETATTR or SETXATTR of a file the binding made answered in C (fuse-native/native/
// fast-create.c own_file_fd: on the fd its READs are served from) after a rule change made the file
// read-only: the mode bits the kernel enforces (default_permissions) would still carry `w`, so the kernel
// would let writes through to the worker, and a setxattr would be told "not supported" instead of refused. The read fd itself is registered again after the
// change (a read is allowed), so it proves nothing about writing. Defence: each file made in C remembers
// the read fast path's generation at its making, and C answers only while it has not moved (a rule
// change, rename, link, discard or commit moves it).
import { describe, expect, it } from 'vitest';
import { useMountHygiene } from '../helpers/worker-fixture.js';
import { nativeCount, ruleChangeRace, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const READ_ONLY_D = [
  ...WRITABLE_OUTPUT,
  { pattern: '/output/d/**', permission: 'read' as const, priority: 50 },
];

describe('attributes of files the binding made, after a rule change', () => {
  useMountHygiene();

  it('a file made writable and turned read-only shows no write bits and its setxattr is refused', async () => {
    const { f, run } = await ruleChangeRace({
      // f3 held open across the change (the kernel keeps its node, the one C made), read again after it
      // (its READs registered again, on the new rules), then stat'ed and set
      fill: ['for i in $(seq 10); do echo x > f$i; chmod 640 f$i; done', 'exec 3< f3'],
      after: [
        'cat <&3 > /dev/null',
        'stat --cached=never -c %a f3',
        `python3 -c 'import os
try:
    os.setxattr("f3", "user.x", b"1"); print("set")
except OSError as e:
    print(e.strerror)'`,
        'exec 3<&-',
      ],
    });
    expect(await nativeCount(f, 'create-native')).toBeGreaterThanOrEqual(9);
    await f.worker.client.request('setRules', { rules: READ_ONLY_D });
    const r = await run;
    expect(r.stdout).toBe('440\nPermission denied\n');
    expect(await nativeCount(f, 'xattr-native')).toBe(0);
    await f.stop();
  }, 60_000);
});
