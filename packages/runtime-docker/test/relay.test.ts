// propagationOf: which mount holds a path (the topmost, deepest one) and its propagation fields.
import { describe, expect, it } from 'vitest';
import { propagationOf } from '../src/container/relay.js';

const mountinfo = [
  '27 1 254:0 / / rw,relatime - ext4 /dev/vda rw',
  '80 27 254:0 /tmp/p /tmp/p rw,relatime shared:40 - ext4 /dev/vda rw',
  '81 80 0:50 / /tmp/p/ws rw,relatime shared:41 - fuse agentfense rw',
  '82 27 254:0 /tmp/q /tmp/q rw,relatime master:40 - ext4 /dev/vda rw',
].join('\n');

describe('propagationOf', () => {
  it('finds the deepest mount holding the path and its propagation', () => {
    expect(propagationOf(mountinfo, '/tmp/p')).toEqual({ mountPoint: '/tmp/p', fields: ['shared:40'] });
    expect(propagationOf(mountinfo, '/tmp/p/ws/x')).toEqual({
      mountPoint: '/tmp/p/ws',
      fields: ['shared:41'],
    });
    expect(propagationOf(mountinfo, '/tmp/q/a')).toEqual({ mountPoint: '/tmp/q', fields: ['master:40'] });
    expect(propagationOf(mountinfo, '/tmp/px')).toEqual({ mountPoint: '/', fields: [] });
  });
});
