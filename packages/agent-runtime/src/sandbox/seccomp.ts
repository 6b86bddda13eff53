// A classic-BPF seccomp program for the Bash sandbox, handed to bubblewrap with `--seccomp FD`.
//
// A network namespace cuts off TCP/UDP and abstract Unix sockets, but not Unix sockets that live in the
// filesystem: connecting to one needs no write access to its mount, so a read-only `/` still reaches the
// Docker socket, a Redis or PostgreSQL socket, D-Bus — each a way to act outside the sandbox. The filter
// makes socket(AF_UNIX, …) fail with EPERM (socketpair, which only connects a process to itself, stays),
// refuses io_uring (its IORING_OP_SOCKET would create sockets without the socket syscall), and kills any
// other syscall ABI (x32, i386 `socketcall`), which the per-number checks would not cover.

const BPF_LD_W_ABS = 0x20;
const BPF_JMP_JEQ_K = 0x15;
const BPF_JMP_JGE_K = 0x35;
const BPF_RET_K = 0x06;

const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const EPERM = 1;
const AF_UNIX = 1;

/** offsetof(struct seccomp_data, …). */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const OFFSET_ARG0_LOW = 16;

interface ArchTable {
  auditArch: number;
  socket: number;
  /** io_uring_setup, io_uring_enter, io_uring_register (one number space on every 64-bit Linux ABI). */
  ioUring: readonly number[];
  /** x86-64 only: syscall numbers with this bit set are the x32 ABI. */
  x32Bit?: number;
}

const ARCHES: Partial<Record<NodeJS.Architecture, ArchTable>> = {
  x64: { auditArch: 0xc000003e, socket: 41, ioUring: [425, 426, 427], x32Bit: 0x40000000 },
  arm64: { auditArch: 0xc00000b7, socket: 198, ioUring: [425, 426, 427] },
};

/** Whether this process's architecture has a filter (else the sandbox reports itself unavailable). */
export function seccompSupported(arch: NodeJS.Architecture = process.arch): boolean {
  return ARCHES[arch] !== undefined;
}

type Insn = [code: number, jt: number, jf: number, k: number];

/** The filter as `struct sock_filter[]` bytes (host byte order: little-endian on both supported arches). */
export function buildSeccompFilter(arch: NodeJS.Architecture = process.arch): Buffer {
  const table = ARCHES[arch];
  if (!table) throw new Error(`no seccomp filter for architecture ${arch}`);
  const p: Insn[] = [];
  const ret = (k: number): Insn => [BPF_RET_K, 0, 0, k];
  p.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARCH]);
  p.push([BPF_JMP_JEQ_K, 1, 0, table.auditArch]);
  p.push(ret(SECCOMP_RET_KILL_PROCESS));
  p.push([BPF_LD_W_ABS, 0, 0, OFFSET_NR]);
  if (table.x32Bit !== undefined) {
    p.push([BPF_JMP_JGE_K, 0, 1, table.x32Bit]);
    p.push(ret(SECCOMP_RET_KILL_PROCESS));
  }
  for (const nr of table.ioUring) {
    p.push([BPF_JMP_JEQ_K, 0, 1, nr]);
    p.push(ret(SECCOMP_RET_ERRNO | EPERM));
  }
  p.push([BPF_JMP_JEQ_K, 0, 3, table.socket]);
  p.push([BPF_LD_W_ABS, 0, 0, OFFSET_ARG0_LOW]);
  p.push([BPF_JMP_JEQ_K, 0, 1, AF_UNIX]);
  p.push(ret(SECCOMP_RET_ERRNO | EPERM));
  p.push(ret(SECCOMP_RET_ALLOW));
  const out = Buffer.alloc(p.length * 8);
  p.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
