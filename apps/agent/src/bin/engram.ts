#!/usr/bin/env node
import { resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { EXIT, stdio } from '../commands/output.js';
import { type AgentConfig, AgentConfigError, loadAgentConfig } from '../config.js';

// `engram`: the CLI. Exit codes (commands/output.ts): 0 ok, 1 failure, 2 usage or configuration error, 3 the
// answer was given but its memory work was lost.
// Command modules load lazily, so `engram --help` does not pay for BullMQ, the SDK and the worker service.

const USAGE_ERROR_CODES = new Set([
  'CONFIG_INVALID',
  'QUEUE_CONFIG_INVALID',
  'RELATIVE',
  'TOO_SHORT',
  'DRIVE_ROOT',
  'UNC',
  'NUL_BYTE',
  'TILDE',
  'EMPTY',
  'INVALID_SESSION_ID',
  'INVALID_MEMORY_FILE',
  'INVALID_ID',
  'NOT_FOUND',
  'PORT_IN_USE',
  'DEV_STACK_RUNNING',
]);

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535)
    throw new InvalidArgumentError('must be a port number (0-65535)');
  return n;
}

function config(): AgentConfig {
  return loadAgentConfig();
}

function cwdOf(opts: { cwd?: string }): string {
  return resolve(opts.cwd ?? process.cwd());
}

let exitCode: number = EXIT.ok;
const setExit = (code: number) => {
  exitCode = code;
};

const program = new Command('engram')
  .description('Long-term memory for coding agents, maintained by background workers on a job queue.')
  .version('0.1.0')
  .exitOverride()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

program
  .command('run')
  .description('run one non-interactive turn and print the answer')
  .requiredOption('-p, --prompt <text>', 'the prompt')
  .option('--session <id>', 'resume this session (default: a new one)')
  .option('--cwd <dir>', 'working directory (default: the current one)')
  .addOption(new Option('--output-format <format>', 'text or json').choices(['text', 'json']).default('text'))
  .option('--allowed-tools <list>', 'tools allowed without asking, e.g. "Bash,Write,Edit"')
  .action(async (opts) => {
    setExit(
      await (await import('../commands/run.js')).runCommand(
        config(),
        {
          prompt: opts.prompt,
          session: opts.session,
          cwd: cwdOf(opts),
          outputFormat: opts.outputFormat,
          allowedTools: opts.allowedTools,
        },
        stdio,
      ),
    );
  });

program
  .command('chat')
  .description('interactive session (asks before writes outside the memory directory)')
  .option('--session <id>', 'resume this session')
  .option('--cwd <dir>', 'working directory')
  .action(async (opts) => {
    setExit(
      await (await import('../commands/chat.js')).chatCommand(
        config(),
        { cwd: cwdOf(opts), session: opts.session },
        stdio,
      ),
    );
  });

const memory = program.command('memory').description("inspect and manage this project's memories");
memory
  .command('list')
  .description('list memories: type, file, age, name, description')
  .option('--cwd <dir>', 'project directory')
  .option('--json', 'machine-readable output')
  .action(async (opts) =>
    setExit(
      await (await import('../commands/memory.js')).memoryList(
        config(),
        { cwd: cwdOf(opts), json: !!opts.json },
        stdio,
      ),
    ),
  );
memory
  .command('show <file>')
  .description('print one memory file')
  .option('--cwd <dir>', 'project directory')
  .action(async (file, opts) =>
    setExit(
      await (await import('../commands/memory.js')).memoryShow(config(), { cwd: cwdOf(opts), file }, stdio),
    ),
  );
memory
  .command('edit <file>')
  .description('open a memory in $VISUAL / $EDITOR')
  .option('--cwd <dir>', 'project directory')
  .action(async (file, opts) =>
    setExit(
      await (await import('../commands/memory.js')).memoryEdit(config(), { cwd: cwdOf(opts), file }, stdio),
    ),
  );
memory
  .command('forget <file>')
  .description('delete a memory and its MEMORY.md pointer')
  .option('--cwd <dir>', 'project directory')
  .action(async (file, opts) =>
    setExit(
      await (await import('../commands/memory.js')).memoryForget(config(), { cwd: cwdOf(opts), file }, stdio),
    ),
  );
memory
  .command('path')
  .description('print the memory directory')
  .option('--cwd <dir>', 'project directory')
  .option('--json', 'all paths, machine-readable')
  .action(async (opts) =>
    setExit(
      await (await import('../commands/memory.js')).memoryPath(
        config(),
        { cwd: cwdOf(opts), json: !!opts.json },
        stdio,
      ),
    ),
  );

memory
  .command('history [file]')
  .description(
    "list the snapshots consolidation took of the memory directory; with a store-backed team file (team/x.md), the memory store's versions of it",
  )
  .option('--cwd <dir>', 'project directory')
  .option('--json', 'machine-readable output')
  .action(async (file: string | undefined, opts) =>
    setExit(
      file
        ? await (await import('../commands/team.js')).memoryHistoryCommand(
            config(),
            { cwd: cwdOf(opts), json: !!opts.json, file },
            stdio,
          )
        : await (await import('../commands/memory.js')).memoryHistory(
            config(),
            { cwd: cwdOf(opts), json: !!opts.json },
            stdio,
          ),
    ),
  );
memory
  .command('restore <snapshot>')
  .description('restore the memory directory to a snapshot (the current state is kept as a new snapshot)')
  .option('--cwd <dir>', 'project directory')
  .action(async (snapshot, opts) =>
    setExit(
      await (await import('../commands/memory.js')).memoryRestore(
        config(),
        { cwd: cwdOf(opts), snapshot },
        stdio,
      ),
    ),
  );

program
  .command('dream')
  .description("consolidate this project's memory now and show its progress")
  .option('--cwd <dir>', 'project directory')
  .option('--force', 'run even if the 24 h / 5 sessions gate is shut')
  .action(async (opts) =>
    setExit(
      await (await import('../commands/dream.js')).dreamCommand(
        config(),
        { cwd: cwdOf(opts), force: !!opts.force },
        stdio,
      ),
    ),
  );

const team = program
  .command('team')
  .description("sync this repository's team memory (memory/team/) with the team memory service");
for (const [name, description] of [
  ['status', 'what a push and a pull would change, what is skipped and why'],
  ['pull', "write the service's team memory here (the service wins where it has news)"],
  ['push', 'send local team memory changes (local wins; files with secrets are never sent)'],
] as const) {
  team
    .command(name)
    .description(description)
    .option('--cwd <dir>', 'project directory')
    .option('--json', 'machine-readable output')
    .action(async (opts) => {
      const commands = await import('../commands/team.js');
      const run = { status: commands.teamStatus, pull: commands.teamPull, push: commands.teamPush }[name];
      setExit(await run(config(), { cwd: cwdOf(opts), json: !!opts.json }, stdio));
    });
}

program
  .command('workers')
  .description('run the worker service (all queues) until Ctrl-C')
  .action(async () => setExit(await (await import('../commands/workers.js')).workersCommand(stdio)));

program
  .command('doctor')
  .description('check the queue engine, ENGRAM_HOME, the model and the workers')
  .option('--json', 'machine-readable output')
  .option(
    '--outbox-max-age <minutes>',
    'fail when memory work has waited in an outbox longer than this (default 10)',
    (v) => {
      const minutes = Number(v);
      if (!Number.isFinite(minutes) || minutes < 0) {
        throw new InvalidArgumentError('expected a number of minutes (0 or more)');
      }
      return minutes;
    },
  )
  .action(async (opts) =>
    setExit(
      await (await import('../commands/doctor.js')).doctorCommand(
        config(),
        {
          json: !!opts.json,
          ...(opts.outboxMaxAge !== undefined ? { outboxMaxAgeMs: opts.outboxMaxAge * 60_000 } : {}),
        },
        stdio,
      ),
    ),
  );

program
  .command('sandbox')
  .description("run a command line as a memory fork's Bash tool would: read-only check, then the OS sandbox")
  .requiredOption('--memory-dir <dir>', 'the memory directory (the only path a fork may change)')
  .option('--cwd <dir>', 'working directory (default: the memory directory)')
  .requiredOption('-c, --command <line>', 'the command line')
  .option('--skip-read-only-check', 'leave the OS sandbox as the only boundary (to test it)')
  .option('--timeout <ms>', 'timeout in milliseconds (default 120000)', (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > 600_000) throw new InvalidArgumentError('must be 1-600000');
    return n;
  })
  .action(async (opts) =>
    setExit(
      await (await import('../commands/sandbox.js')).sandboxCommand(
        {
          memoryDir: resolve(opts.memoryDir),
          command: opts.command,
          ...(opts.cwd ? { cwd: resolve(opts.cwd) } : {}),
          ...(opts.skipReadOnlyCheck ? { skipReadOnlyCheck: true } : {}),
          ...(opts.timeout !== undefined ? { timeoutMs: opts.timeout } : {}),
        },
        stdio,
      ),
    ),
  );

program
  .command('dev')
  .description('run the whole stack on this machine (queue engine + workers + dashboard) until Ctrl-C')
  .option('--port <port>', 'dashboard/metrics port (default 8090, or a free one when 8090 is busy)', port)
  .option(
    '--scripted-model',
    'no API key: start a local scripted model (canned replies) for workers and agents',
  )
  .action(async (opts) =>
    setExit(
      await (await import('../commands/dev.js')).devCommand(
        config(),
        { ...(opts.port !== undefined ? { port: opts.port } : {}), scriptedModel: !!opts.scriptedModel },
        stdio,
      ),
    ),
  );

program
  .command('demo')
  .description('scripted end-to-end demo against a local test model server (no API key needed)')
  .option(
    '--home <dir>',
    'ENGRAM_HOME for the demo (default: ENGRAM_HOME; it keeps ENGRAM_HOME/demo-project)',
  )
  .action(async (opts) =>
    setExit(
      await (await import('../commands/demo.js')).demoCommand(
        config(),
        { ...(opts.home ? { home: resolve(opts.home) } : {}) },
        stdio,
      ),
    ),
  );

program
  .command('mcp')
  .description("MCP server over stdio for this project's memories (search, list, read, save, forget)")
  .option('--cwd <dir>', 'project directory')
  .option(
    '--claude-code',
    "serve Claude Code's memory: ENGRAM_HOME defaults to CLAUDE_CONFIG_DIR or ~/.claude, as for `engram hook`",
  )
  .action(async (opts) => {
    const { claudeHome } = await import('../commands/claude-home.js');
    const cfg = opts.claudeCode
      ? loadAgentConfig({ ...process.env, ENGRAM_HOME: process.env.ENGRAM_HOME || claudeHome() })
      : config();
    setExit(await (await import('../commands/mcp.js')).mcpCommand(cfg, { cwd: cwdOf(opts) }));
  });

program
  .command('serve')
  .description('hosted HTTP API for tenants: sessions, streamed turns, memory (see /openapi.json)')
  .option('--port <port>', 'port', port, 8080)
  .option('--host <host>', 'interface to bind', '127.0.0.1')
  .action(async (opts) =>
    setExit(
      await (await import('../commands/serve.js')).serveCommand(
        config(),
        { port: opts.port, host: opts.host },
        stdio,
      ),
    ),
  );

const tenants = program.command('tenants').description('tenants and API keys of `engram serve`');
tenants
  .command('add <name>')
  .description('add a tenant owning a workspace; prints its API key (once) on the last line of stdout')
  .requiredOption('--workspace <dir>', 'directory every session of the tenant must run inside')
  .option('--allowed-tools <list>', 'tools served turns may use unattended (default "Read,Grep,Glob")')
  .option('--create', 'create the workspace directory when it does not exist yet')
  .option(
    '--reuse-memory-of <name>',
    "take over a revoked tenant's memory (same workspace); without it a new tenant starts with empty memory",
  )
  .action(async (name, opts) => {
    const { tenantsCommand } = await import('../commands/tenants.js');
    const allowedTools = opts.allowedTools
      ? String(opts.allowedTools)
          .split(/[,\s]+/)
          .filter(Boolean)
      : undefined;
    setExit(
      await tenantsCommand(
        config(),
        {
          kind: 'add',
          name,
          workspace: resolve(opts.workspace),
          create: !!opts.create,
          ...(allowedTools ? { allowedTools } : {}),
          ...(opts.reuseMemoryOf ? { reuseMemoryOf: String(opts.reuseMemoryOf) } : {}),
        },
        stdio,
      ),
    );
  });
tenants
  .command('list')
  .description('list tenants (never their keys)')
  .option('--json', 'machine-readable output')
  .action(async (opts) => {
    const { tenantsCommand } = await import('../commands/tenants.js');
    setExit(await tenantsCommand(config(), { kind: 'list', json: !!opts.json }, stdio));
  });
tenants
  .command('revoke <name>')
  .description("revoke a tenant's API key on every replica at once")
  .action(async (name) => {
    const { tenantsCommand } = await import('../commands/tenants.js');
    setExit(await tenantsCommand(config(), { kind: 'revoke', name }, stdio));
  });

tenants
  .command('rotate <name>')
  .description('give a tenant a new API key (printed once); the old one stops now or after --grace')
  .option(
    '--grace <duration>',
    'keep the old key working this long, e.g. 10m, 1h, 2d (default: revoke it now)',
  )
  .action(async (name, opts) => {
    const { tenantsCommand } = await import('../commands/tenants.js');
    setExit(
      await tenantsCommand(
        config(),
        { kind: 'rotate', name, ...(opts.grace !== undefined ? { grace: String(opts.grace) } : {}) },
        stdio,
      ),
    );
  });

tenants
  .command('stores <name> [change...]')
  .description(
    "a tenant's memory-store bindings for team sync: list; set owner/name=memstore_… (or *=…); unset owner/name; create owner/name (a new store of the tenant). Each store is checked as the tenant against ENGRAM_TEAM_SYNC_URL",
  )
  .option('--json', 'machine-readable output')
  .action(async (name, change: string[], opts) => {
    const { tenantsCommand } = await import('../commands/tenants.js');
    setExit(await tenantsCommand(config(), { kind: 'stores', name, args: change, json: !!opts.json }, stdio));
  });

program
  .command('hook <event>')
  .description(
    "answer one Claude Code hook (SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd): reads the hook's JSON on stdin; always exits 0",
  )
  .action(async (event: string) => {
    // The same lean entry bin/engram.js routes `engram hook` to before loading this CLI.
    setExit(await (await import('../commands/hook-entry.js')).hookMain([event]));
  });

program
  .command('setup <agent>')
  .description("write Engram's hooks into an agent's settings (claude-code: ~/.claude/settings.json)")
  .option('--uninstall', "remove Engram's hooks (and only those)")
  .action(async (agent: string, opts) => {
    if (agent !== 'claude-code') {
      process.stderr.write(`engram setup: unknown agent ${agent} (known: claude-code)\n`);
      setExit(EXIT.usage);
      return;
    }
    const { setupClaudeCodeCommand } = await import('../commands/setup.js');
    setExit(await setupClaudeCodeCommand({ uninstall: !!opts.uninstall }, stdio));
  });

async function main(): Promise<void> {
  // `engram … | head`: a closed stdout is not an error; exit quietly (exit hooks still stop child servers).
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(exitCode);
  });
  // OpenTelemetry from the OTEL_* variables, before any command builds a queue or a model client (off unless
  // configured: then nothing is loaded). Service name per process kind.
  const { startTelemetry } = await import('@engram/telemetry/setup');
  const command = process.argv[2];
  const telemetry = await startTelemetry(
    command === 'serve' || command === 'workers' || command === 'dev' ? command : 'cli',
  );
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      exitCode = error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    } else {
      const e = error as Error & { code?: string; status?: number };
      process.stderr.write(`engram: ${e.message}\n`);
      exitCode =
        error instanceof AgentConfigError || (e.code && USAGE_ERROR_CODES.has(e.code))
          ? EXIT.usage
          : EXIT.failure;
    }
  }
  // A CLI turn's spans are exported before the process ends.
  await telemetry.shutdown();
  process.exit(exitCode);
}

void main();
