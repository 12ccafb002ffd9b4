// relay.ts `anchoredIn`: whether a long-lived process's /workspace sits on its anchor's bare directory (and
// so follows a worker restart) or on a FUSE mount bwrap bound by mistake. The layouts are mountinfo lines
// read inside real sandboxes (the missed ones from the CI failure's reproduction: ENOTCONN after a restart).
import { describe, expect, it } from 'vitest';
import { anchoredIn } from '../src/sandbox-fs/relay.js';

const ROOT = '76 60 0:38 / / rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=64k';
const ANCHOR =
  '91 76 0:39 /workspace /workspace rw,nosuid,nodev,noexec,relatime master:1 - tmpfs agentfense rw,size=64k';
const FUSE_ON_ANCHOR =
  '92 91 0:46 / /workspace rw,nosuid,nodev,relatime master:2 - fuse.agentfense agentfense rw,user_id=0';
const FUSE_ON_ROOT =
  '94 76 0:41 / /workspace rw,nosuid,nodev,relatime master:2 - fuse.agentfense agentfense rw,user_id=0';
const FUSE_ON_FUSE =
  '95 94 0:41 / /workspace rw,nosuid,nodev,relatime master:2 - fuse.agentfense agentfense rw,user_id=0';

describe('anchoredIn', () => {
  it('accepts the anchor alone and the anchor with the worker mount on top', () => {
    expect(anchoredIn([ROOT, ANCHOR].join('\n'))).toBe(true);
    expect(anchoredIn([ROOT, ANCHOR, FUSE_ON_ANCHOR].join('\n'))).toBe(true);
    // Order in the file does not matter: the bottom is found by parent ids.
    expect(anchoredIn([FUSE_ON_ANCHOR, ROOT, ANCHOR].join('\n'))).toBe(true);
  });

  it('refuses a FUSE mount bound where the anchor should be, alone or under another', () => {
    expect(anchoredIn([ROOT, FUSE_ON_ROOT].join('\n'))).toBe(false);
    expect(anchoredIn([ROOT, FUSE_ON_ROOT, FUSE_ON_FUSE].join('\n'))).toBe(false);
  });

  it('accepts an anchor that receives no propagation (a launch again would not change it); refuses no mount', () => {
    expect(anchoredIn([ROOT, ANCHOR.replace(' master:1', '')].join('\n'))).toBe(true);
    expect(anchoredIn(ROOT)).toBe(false);
  });
});
