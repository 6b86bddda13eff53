import { describe, expect, it } from 'vitest';
import { declaredWriteJail, withWriteJail } from './write-jail.js';

describe('write jail declaration', () => {
  it('attaches the jail to the same function and reads it back normalised', () => {
    const policy = async () => ({ behavior: 'allow' as const });
    const jailed = withWriteJail(policy, { root: '/mem' });
    expect(jailed).toBe(policy);
    expect(jailed.writeJail).toEqual({ root: '/mem' });
    expect(declaredWriteJail(jailed)).toEqual({ root: '/mem', bash: 'read-only' });
    expect(declaredWriteJail(withWriteJail(() => {}, { root: '/w', bash: 'write-root' }))).toEqual({
      root: '/w',
      bash: 'write-root',
    });
  });

  it('finds no jail on undeclared or malformed policies', () => {
    expect(declaredWriteJail(() => {})).toBeUndefined();
    expect(declaredWriteJail(null)).toBeUndefined();
    expect(declaredWriteJail(undefined)).toBeUndefined();
    expect(declaredWriteJail({ writeJail: 'root' })).toBeUndefined();
    expect(declaredWriteJail({ writeJail: { root: '' } })).toBeUndefined();
    expect(declaredWriteJail({ writeJail: { root: 7 } })).toBeUndefined();
    expect(declaredWriteJail({ writeJail: { root: '/m', bash: 'anything' } })).toEqual({
      root: '/m',
      bash: 'read-only',
    });
  });
});
