import { describe, expect, it } from 'vitest';
import {
  BENIGN_NOTES,
  buildSecretCorpus,
  CORPUS_EXCLUDED,
  CORPUS_SPECS,
  prng,
} from './secret-corpus.test-helpers.js';
import { SECRET_RULES } from './secret-rules.js';
import {
  isPlaceholderSecret,
  REDACTED,
  redactSecrets,
  scanForSecrets,
  shannonEntropy,
} from './secret-scanner.js';

// Fixtures are assembled at run time from a prefix and a pseudo-random body, so no string in this repository
// looks like a real credential (and secret scanners on the repository stay quiet).

const next = prng(20260305);
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const UPPER = LOWER.toUpperCase();
const DIGITS = '0123456789';
const ALNUM = LOWER + UPPER + DIGITS;
const HEX = '0123456789abcdef';
const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const B64 = `${ALNUM}+/`;
const BECH32 = 'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L';
const rand = (alphabet: string, n: number) =>
  Array.from({ length: n }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
const j = (...parts: string[]) => parts.join('');
const ant = (kind: string) => ['sk', 'ant', kind].join('-');

const pem = (label: string, bodyLength: number) =>
  j(
    `-----BEGIN ${label}-----\n`,
    rand(B64, bodyLength).replace(/(.{64})/g, '$1\n'),
    `\n-----END ${label}-----`,
  );

interface Fixture {
  positive: string;
  negative: string;
}

const FIXTURES: Record<string, Fixture> = {
  'aws-access-token': { positive: j('AKIA', rand(B32, 16)), negative: j('AKIA', rand(B32, 15)) },
  'gcp-api-key': {
    positive: j('"AIza', rand(`${ALNUM}_-`, 35), '"'),
    negative: j('AIza', rand(ALNUM, 34), ' '),
  },
  'azure-ad-client-secret': {
    positive: j(' ', rand(ALNUM, 3), '8Q~', rand(`${ALNUM}_~.-`, 32), ' '),
    negative: j(' ', rand(ALNUM, 3), '8Q-', rand(`${ALNUM}_~.-`, 32), ' '),
  },
  'digitalocean-pat': { positive: j('dop_v1_', rand(HEX, 64)), negative: j('dop_v1_', rand(HEX, 63)) },
  'digitalocean-access-token': {
    positive: j('doo_v1_', rand(HEX, 64)),
    negative: j('doo_v1_', rand(HEX.toUpperCase().slice(10), 64)),
  },
  'digitalocean-refresh-token': {
    positive: j('dor_v1_', rand(HEX, 64)),
    negative: j('dor_v2_', rand(HEX, 64)),
  },
  'anthropic-api-key': {
    positive: j(ant('api03'), '-', rand(`${ALNUM}_-`, 93), 'AA'),
    negative: j(ant('api03'), '-', rand(`${ALNUM}_-`, 93), 'AB'),
  },
  'anthropic-admin-api-key': {
    positive: j(ant('admin01'), '-', rand(`${ALNUM}_-`, 93), 'AA'),
    negative: j(ant('admin02'), '-', rand(`${ALNUM}_-`, 93), 'AA'),
  },
  'openai-api-key': {
    positive: j('sk-proj-', rand(ALNUM, 74), 'T3BlbkFJ', rand(ALNUM, 74)),
    negative: j('sk-proj-', rand(ALNUM, 74), 'T3BlbkFK', rand(ALNUM, 74)),
  },
  'huggingface-access-token': {
    positive: j(' hf_', rand(LOWER + UPPER, 34), ' '),
    negative: j(' hf_', rand(LOWER + UPPER, 33), ' '),
  },
  'github-pat': { positive: j('ghp_', rand(ALNUM, 36)), negative: j('ghp_', rand(ALNUM, 35)) },
  'github-fine-grained-pat': {
    positive: j('github_pat_', rand(`${ALNUM}_`, 82)),
    negative: j('github_pat_', rand(`${ALNUM}_`, 81), ' '),
  },
  'github-app-token': { positive: j('ghs_', rand(ALNUM, 36)), negative: j('ghx_', rand(ALNUM, 36)) },
  'github-oauth': { positive: j('gho_', rand(ALNUM, 36)), negative: j('gho_', rand(ALNUM, 35)) },
  'github-refresh-token': { positive: j('ghr_', rand(ALNUM, 36)), negative: j('ghr_', rand(ALNUM, 30)) },
  'gitlab-pat': {
    positive: j('glpat-', rand(`${ALNUM}_-`, 20)),
    negative: j('glpat-', rand(ALNUM, 19), ' '),
  },
  'gitlab-deploy-token': {
    positive: j('gldt-', rand(ALNUM, 20)),
    negative: j('gldt-', rand(ALNUM, 19), ' '),
  },
  'gitlab-runner-authentication-token': {
    positive: j('glrt-', rand(ALNUM, 20)),
    negative: j('glrt_', rand(ALNUM, 20)),
  },
  'slack-bot-token': {
    positive: j('xoxb-', rand(DIGITS, 11), '-', rand(DIGITS, 12), '-', rand(ALNUM, 24)),
    negative: j('xoxb-', rand(DIGITS, 9), '-', rand(DIGITS, 12), '-', rand(ALNUM, 24)),
  },
  'slack-user-token': {
    positive: j(
      'xoxp-',
      rand(DIGITS, 11),
      '-',
      rand(DIGITS, 11),
      '-',
      rand(DIGITS, 12),
      '-',
      rand(ALNUM, 32),
    ),
    negative: j('xoxp-', rand(DIGITS, 11), '-', rand(DIGITS, 11), '-', rand(ALNUM, 32)),
  },
  'slack-app-token': {
    positive: j('xapp-1-A', rand(UPPER + DIGITS, 10), '-', rand(DIGITS, 13), '-', rand(LOWER + DIGITS, 64)),
    negative: j('xapp-x-A', rand(UPPER + DIGITS, 10), '-', rand(DIGITS, 13), '-', rand(LOWER + DIGITS, 64)),
  },
  'twilio-api-key': { positive: j(' SK', rand(HEX, 32), ' '), negative: j(' SK', rand(HEX, 31), ' ') },
  'sendgrid-api-token': {
    positive: j('SG.', rand(ALNUM, 22), '.', rand(ALNUM, 43)),
    negative: j('SG.', rand(ALNUM, 22), '.', rand(ALNUM, 30), ' '),
  },
  'npm-access-token': { positive: j('npm_', rand(ALNUM, 36)), negative: j('npm_', rand(ALNUM, 35)) },
  'pypi-upload-token': {
    positive: j('pypi-AgEIcHlwaS5vcmc', rand(`${ALNUM}_-`, 60)),
    negative: j('pypi-AgEIcHlwaS5vcmd', rand(`${ALNUM}_-`, 60)),
  },
  'databricks-api-token': { positive: j('dapi', rand(HEX, 32)), negative: j('dapi', rand(HEX, 31)) },
  'hashicorp-tf-api-token': {
    positive: j(rand(ALNUM, 14), '.atlasv1.', rand(ALNUM, 65)),
    negative: j(rand(ALNUM, 14), '.atlasv2.', rand(ALNUM, 65)),
  },
  'pulumi-api-token': { positive: j('pul-', rand(HEX, 40)), negative: j('pul-', rand(HEX, 39)) },
  'postman-api-token': {
    positive: j('PMAK-', rand(HEX, 24), '-', rand(HEX, 34)),
    negative: j('PMAK-', rand(HEX, 24), '-', rand(HEX, 33)),
  },
  'linear-api-key': { positive: j('lin_api_', rand(ALNUM, 40)), negative: j('lin_api_', rand(ALNUM, 39)) },
  'doppler-api-token': { positive: j('dp.pt.', rand(ALNUM, 43)), negative: j('dp.pt.', rand(ALNUM, 42)) },
  'grafana-api-key': { positive: j('eyJrIjoi', rand(ALNUM, 80)), negative: j('eyJrIjoi', rand(ALNUM, 60)) },
  'grafana-cloud-api-token': { positive: j('glc_', rand(B64, 40)), negative: j('glc_', rand(B64, 30)) },
  'grafana-service-account-token': {
    positive: j('glsa_', rand(ALNUM, 32), '_', rand(HEX, 8)),
    negative: j('glsa_', rand(ALNUM, 32), '_', rand(HEX, 7)),
  },
  'sentry-user-token': { positive: j('sntryu_', rand(HEX, 64)), negative: j('sntryu_', rand(HEX, 63)) },
  'sentry-org-token': {
    positive: j(
      'sntrys_eyJpYXQiO',
      rand(ALNUM, 20),
      'LCJyZWdpb25fdXJs',
      rand(ALNUM, 20),
      '_',
      rand(ALNUM, 43),
    ),
    negative: j(
      'sntrys_eyJpYXQiO',
      rand(ALNUM, 20),
      'LCJyZWdpb25fdXJz',
      rand(ALNUM, 20),
      '_',
      rand(ALNUM, 43),
    ),
  },
  'stripe-access-token': {
    positive: j('sk_live_', rand(ALNUM, 24)),
    negative: j('sk_demo_', rand(ALNUM, 24)),
  },
  'shopify-access-token': { positive: j('shpat_', rand(HEX, 32)), negative: j('shpat_', rand(HEX, 31)) },
  'shopify-shared-secret': {
    positive: j('shpss_', rand(HEX, 32)),
    negative: j('shpss_', rand(LOWER.slice(6), 32)),
  },
  'shopify-custom-access-token': {
    positive: j('shpca_', rand(HEX, 32)),
    negative: j('shpca_', rand(HEX, 20)),
  },
  'shopify-private-app-access-token': {
    positive: j('shppa_', rand(HEX, 32)),
    negative: j('shppx_', rand(HEX, 32)),
  },
  'age-secret-key': {
    positive: j('AGE-SECRET-KEY-1', rand(BECH32, 58)),
    negative: j('AGE-SECRET-KEY-1', rand(BECH32, 57)),
  },
  'private-key': { positive: pem('RSA PRIVATE KEY', 200), negative: pem('PUBLIC KEY', 200) },
};

const sentence = (token: string) => `Deploy notes: the credential is ${token}\nkeep it safe.`;

describe('secret scanner rules', () => {
  it('covers every gitleaks rule family, each rule with corpus samples, fixtures here naming real rules', () => {
    expect(SECRET_RULES.length).toBeGreaterThanOrEqual(200);
    expect(new Set(SECRET_RULES.map((r) => r.id)).size).toBe(SECRET_RULES.length);
    const ids = SECRET_RULES.map((r) => r.id);
    for (const id of Object.keys(FIXTURES)) expect(ids).toContain(id);
    expect(CORPUS_SPECS.map((s) => s.id).sort()).toEqual([...ids].sort());
    expect(Object.keys(CORPUS_EXCLUDED)).toEqual(['pkcs12-file']);
  });

  describe.each(SECRET_RULES.filter((r) => r.id in FIXTURES).map((r) => [r.id, r.label] as const))(
    '%s',
    (id, label) => {
      const fixture = FIXTURES[id] as Fixture;

      it('detects a positive sample, reporting the rule and label but never the text', () => {
        const found = scanForSecrets(sentence(fixture.positive));
        expect(found).toContainEqual({ ruleId: id, label });
        expect(JSON.stringify(found)).not.toContain(fixture.positive.trim());
      });

      it('does not fire on a near miss', () => {
        expect(scanForSecrets(sentence(fixture.negative)).map((f) => f.ruleId)).not.toContain(id);
      });

      it('redacts the positive sample', () => {
        const redacted = redactSecrets(sentence(fixture.positive));
        expect(redacted).toContain(REDACTED);
        expect(redacted).not.toContain(fixture.positive.trim());
        expect(redacted.startsWith('Deploy notes: the credential is ')).toBe(true);
        expect(redacted.endsWith('\nkeep it safe.')).toBe(true);
      });
    },
  );
});

describe('scanForSecrets / redactSecrets', () => {
  it('reports each rule once, in rule order, however many times it matches', () => {
    const text = `${FIXTURES['github-pat']?.positive} and ${j('ghp_', rand(ALNUM, 36))} and ${FIXTURES['aws-access-token']?.positive}`;
    expect(scanForSecrets(text).map((f) => f.ruleId)).toEqual(['aws-access-token', 'github-pat']);
  });

  it('redacts every secret and keeps the surrounding text', () => {
    const a = FIXTURES['npm-access-token']?.positive as string;
    const b = FIXTURES['stripe-access-token']?.positive as string;
    expect(redactSecrets(`npm=${a}; stripe="${b}"!`)).toBe(`npm=${REDACTED}; stripe="${REDACTED}"!`);
  });

  it('keeps the boundary characters of rules that match them', () => {
    const token = j('hf_', rand(LOWER, 34));
    expect(redactSecrets(`token="${token}"`)).toBe(`token="${REDACTED}"`);
  });

  it('finds nothing in ordinary notes', () => {
    const notes = [
      '- [Testing policy](feedback_testing.md) — real DB, no mocks',
      'The API key lives in 1Password under "Prod / Stripe"; never paste it here.',
      'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
      'Use `sk_test_` keys only in CI (prefix alone, no key).',
      'AKIA is the prefix of AWS access key ids.',
    ].join('\n');
    expect(scanForSecrets(notes)).toEqual([]);
    expect(redactSecrets(notes)).toBe(notes);
    expect(scanForSecrets('')).toEqual([]);
  });
});

describe('the labelled corpus (bench/secrets.ts reports the same numbers)', () => {
  const corpus = buildSecretCorpus();

  it('is large and balanced: true positives for every rule, false positives for every family', () => {
    const tps = corpus.filter((s) => s.kind === 'tp');
    const fps = corpus.filter((s) => s.kind === 'fp');
    expect(tps.length).toBeGreaterThanOrEqual(1000);
    expect(fps.length).toBeGreaterThanOrEqual(1000);
    for (const rule of SECRET_RULES) expect(tps.some((s) => s.ruleId === rule.id)).toBe(true);
    const tpFamilies = new Set(tps.map((s) => s.family));
    const fpFamilies = new Set(fps.map((s) => s.family));
    for (const family of tpFamilies) expect(fpFamilies.has(family)).toBe(true);
  });

  it('is deterministic for a seed', () => {
    expect(buildSecretCorpus(7)).toEqual(buildSecretCorpus(7));
    expect(buildSecretCorpus(7)).not.toEqual(buildSecretCorpus(8));
  });

  it('detects every true positive with its own rule, and redacts it', () => {
    const missed: string[] = [];
    for (const sample of corpus.filter((s) => s.kind === 'tp')) {
      const found = scanForSecrets(sample.text);
      if (!found.some((f) => f.ruleId === sample.ruleId)) missed.push(`${sample.ruleId}/${sample.shape}`);
      const redacted = redactSecrets(sample.text);
      if (!redacted.includes(REDACTED) || scanForSecrets(redacted).some((f) => f.ruleId === sample.ruleId))
        missed.push(`${sample.ruleId}/${sample.shape} (redaction)`);
    }
    expect(missed).toEqual([]);
  });

  it('flags none of the false positives (placeholders, near misses, ordinary notes)', () => {
    const flagged = corpus
      .filter((s) => s.kind === 'fp')
      .filter((s) => scanForSecrets(s.text).length > 0)
      .map((s) => `${s.ruleId}/${s.shape}`);
    expect(flagged).toEqual([]);
  });
});

describe('placeholder and entropy filter', () => {
  it('drops documented placeholders', () => {
    const docs = [
      'aws_access_key_id = AKIAIOSFODNN7EXAMPLE',
      `GITHUB_TOKEN=ghp_${'x'.repeat(36)}`,
      `token: ghp_${'X'.repeat(36)}`,
      'api_key = "your-api-key"',
      'SLACK_TOKEN=<token>',
      `stripe_key = sk_live_${'0'.repeat(24)}`,
      `npm_${'a'.repeat(36)}`,
      `DATADOG_API_KEY=${'abcdefghij'.repeat(4)}`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${VAR} placeholder, not a template
      'password = "${DB_PASSWORD}"',
    ];
    for (const line of docs) expect(scanForSecrets(line), line).toEqual([]);
    expect(BENIGN_NOTES.filter((note) => scanForSecrets(note).length > 0)).toEqual([]);
  });

  it('keeps a real-looking value of the same shape', () => {
    const value = rand(ALNUM, 36);
    expect(scanForSecrets(`GITHUB_TOKEN=ghp_${value}`).map((f) => f.ruleId)).toContain('github-pat');
    expect(scanForSecrets(`api_key = "${rand(ALNUM, 24)}7"`).map((f) => f.ruleId)).toContain(
      'generic-api-key',
    );
  });

  it('measures entropy and recognises filler', () => {
    expect(shannonEntropy('')).toBe(0);
    expect(shannonEntropy('aaaa')).toBe(0);
    expect(shannonEntropy('abcd')).toBeCloseTo(2);
    expect(isPlaceholderSecret('AKIAIOSFODNN7EXAMPLE')).toBe(true);
    expect(isPlaceholderSecret(`ghp_${'x'.repeat(36)}`)).toBe(true);
    expect(isPlaceholderSecret('your-api-key')).toBe(true);
    expect(isPlaceholderSecret('0123456789abcdef0123')).toBe(true);
    expect(isPlaceholderSecret(`glpat-${rand(ALNUM, 20)}`)).toBe(false);
  });

  it('names rules, never values, and logs nothing of the text', () => {
    const secret = j('xoxb-', rand(DIGITS, 12), '-', rand(DIGITS, 13), '-', rand(ALNUM, 24));
    const found = scanForSecrets(`slack_bot_token: ${secret}`);
    expect(found.length).toBeGreaterThan(0);
    for (const f of found) expect(Object.keys(f).sort()).toEqual(['label', 'ruleId']);
    expect(JSON.stringify(found)).not.toContain(secret.slice(5));
  });
});
