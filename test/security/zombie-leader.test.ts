// Attack: outlive your command with a leaderless thread group (helpers/leaderless.ts), bwrap. Commands of a
// sandbox share its launcher's pid namespace, and what a command leaves behind is killed when it ends
// (runtime-bwrap launcher/process-tree.ts). The sweep took a zombie for a process about to be reaped and skipped
// it, so a zombie leader whose other thread lived on survived every later command of the sandbox, and each
// later command waited out the sweep's 5 s deadline for that "dying" child of af-init. Defence
// (protocol runtime/thread-group.ts): a process is dead only when none of its threads lives; a zombie
// leader with a live thread is SIGKILLed like any process (the signal reaches the whole thread group).
import { describe } from 'vitest';
import { leaderlessAttack } from '../helpers/leaderless.js';

describe('a leaderless thread group does not outlive its command (bwrap)', () => {
  leaderlessAttack('bwrap');
});
