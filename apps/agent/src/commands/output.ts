// Small output helpers shared by commands: human lines go to stderr when stdout carries machine output.

export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export const stdio: Output = {
  out: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  err: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

/** Exit codes: 0 ok, 1 model or tool failure, 2 usage or configuration error. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;
