#!/usr/bin/env node
// The `agentfense` executable: runs the built CLI (run `pnpm build` after changing the sources).
import { runCli } from '../dist/cli/main.js';

process.exitCode = await runCli(process.argv.slice(2));
