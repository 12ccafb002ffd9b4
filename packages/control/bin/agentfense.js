#!/usr/bin/env node
// The `agentfense` executable: runs the built CLI (run `pnpm build` after changing the sources).
import { closeInheritedFds } from '../dist/cli/inherited-fds.js';
import { runCli } from '../dist/cli/main.js';

// Before anything is spawned: no fd leaked to us may reach a sandbox through bwrap.
closeInheritedFds();
process.exitCode = await runCli(process.argv.slice(2));
