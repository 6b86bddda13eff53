#!/usr/bin/env node
import { hookMain } from '../commands/hook-entry.js';

// `engram-hook <event>`, also reached as `engram hook <event>` through bin/engram.js: the lean entry (no
// commander, no command modules) Claude Code's hooks run. See commands/hook-entry.ts.
const args = process.argv.slice(2);
if (args[0] === 'hook') args.shift();
process.exitCode = await hookMain(args);
