// Small output helpers shared by commands: human lines go to stderr when stdout carries machine output.

export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export const stdio: Output = {
  out: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  err: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

/**
 * Exit codes: 0 ok; 1 failure (model or tool, a failed consolidation, a missing memory); 2 usage or
 * configuration error (bad option or setting, busy port, a stack already running on this ENGRAM_HOME); 3 the
 * answer was given but its memory work was lost (`engram run`: could not be queued nor kept in the session's
 * outbox, or extraction failed for good). Work kept in the outbox is not lost: 0, with a line on stderr.
 */
export const EXIT = { ok: 0, failure: 1, usage: 2, memory: 3 } as const;
