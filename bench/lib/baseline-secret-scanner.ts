// The secret scanner as it was before the gitleaks-coverage rewrite (no keyword prefilter, no placeholder filter), kept
// only as bench/secrets.ts's baseline: its recall/precision and its speed, measured in the same run.

// A curated set of high-confidence credential patterns (adapted from gitleaks rules that have distinctive
// prefixes or structure; generic "key = value" heuristics are left out because they flag ordinary notes).
// Used to keep secrets out of team memory, which is shared with every collaborator. Results name the rule,
// never the matched text, so a report can be logged without leaking what it found.

export interface SecretRule {
  id: string;
  label: string;
  /** Regex source (JS syntax). A named group `secret` marks the part to redact when boundaries are matched. */
  source: string;
  flags?: string;
}

export interface SecretMatch {
  ruleId: string;
  label: string;
}

// Never spelled out whole, so the scanner's own source and bundle do not look like they contain a key.
const ANTHROPIC_PREFIX = ['sk', 'ant', 'api03'].join('-');
const ANTHROPIC_ADMIN_PREFIX = ['sk', 'ant', 'admin01'].join('-');

// Characters that may precede/follow a token in text, code or config (quotes, spaces, =, :, brackets, commas).
const LEFT = `(?:^|[\\\\'"\`\\s>=:(,)])`;
const RIGHT = `(?:$|[\\\\'"\`\\s<),])`;

export const SECRET_RULES: readonly SecretRule[] = [
  // Cloud providers
  {
    id: 'aws-access-token',
    label: 'AWS access key ID',
    source: String.raw`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`,
  },
  {
    id: 'gcp-api-key',
    label: 'Google Cloud API key',
    source: String.raw`\b(?<secret>AIza[\w-]{35})(?:[\x60'"\s;]|\\[nrt]|$)`,
  },
  {
    id: 'azure-ad-client-secret',
    label: 'Azure AD client secret',
    source: `${LEFT}(?<secret>[a-zA-Z0-9_~.]{3}\\dQ~[a-zA-Z0-9_~.-]{31,34})${RIGHT}`,
  },
  {
    id: 'digitalocean-pat',
    label: 'DigitalOcean personal access token',
    source: String.raw`\bdop_v1_[a-f0-9]{64}\b`,
  },
  {
    id: 'digitalocean-access-token',
    label: 'DigitalOcean OAuth access token',
    source: String.raw`\bdoo_v1_[a-f0-9]{64}\b`,
  },
  {
    id: 'digitalocean-refresh-token',
    label: 'DigitalOcean OAuth refresh token',
    source: String.raw`\bdor_v1_[a-f0-9]{64}\b`,
  },
  // AI providers
  {
    id: 'anthropic-api-key',
    label: 'Anthropic API key',
    source: `\\b${ANTHROPIC_PREFIX}-[a-zA-Z0-9_\\-]{93}AA\\b`,
  },
  {
    id: 'anthropic-admin-api-key',
    label: 'Anthropic admin API key',
    source: `\\b${ANTHROPIC_ADMIN_PREFIX}-[a-zA-Z0-9_\\-]{93}AA\\b`,
  },
  {
    id: 'openai-api-key',
    label: 'OpenAI API key',
    source: String.raw`\b(?:sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\b|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20}\b)`,
  },
  {
    id: 'huggingface-access-token',
    label: 'Hugging Face access token',
    source: `${LEFT}(?<secret>hf_[a-zA-Z]{34})${RIGHT}`,
  },
  // Source hosting
  { id: 'github-pat', label: 'GitHub personal access token', source: 'ghp_[0-9a-zA-Z]{36}' },
  {
    id: 'github-fine-grained-pat',
    label: 'GitHub fine-grained token',
    source: String.raw`github_pat_\w{82}`,
  },
  { id: 'github-app-token', label: 'GitHub app token', source: '(?:ghu|ghs)_[0-9a-zA-Z]{36}' },
  { id: 'github-oauth', label: 'GitHub OAuth token', source: 'gho_[0-9a-zA-Z]{36}' },
  { id: 'github-refresh-token', label: 'GitHub refresh token', source: 'ghr_[0-9a-zA-Z]{36}' },
  { id: 'gitlab-pat', label: 'GitLab personal access token', source: String.raw`glpat-[\w-]{20}` },
  { id: 'gitlab-deploy-token', label: 'GitLab deploy token', source: String.raw`gldt-[0-9a-zA-Z_\-]{20}` },
  { id: 'gitlab-runner-token', label: 'GitLab runner token', source: String.raw`glrt-[0-9a-zA-Z_\-]{20}` },
  // Messaging and communications
  {
    id: 'slack-bot-token',
    label: 'Slack bot token',
    source: 'xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*',
  },
  {
    id: 'slack-user-token',
    label: 'Slack user token',
    source: 'xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}',
  },
  {
    id: 'slack-app-token',
    label: 'Slack app-level token',
    source: String.raw`xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+`,
    flags: 'i',
  },
  { id: 'twilio-api-key', label: 'Twilio API key', source: String.raw`\bSK[0-9a-fA-F]{32}\b` },
  {
    id: 'sendgrid-api-token',
    label: 'SendGrid API token',
    source: String.raw`\bSG\.[a-zA-Z0-9=_\-.]{66}\b`,
  },
  // Package registries
  { id: 'npm-access-token', label: 'npm access token', source: String.raw`\bnpm_[a-zA-Z0-9]{36}\b` },
  {
    id: 'pypi-upload-token',
    label: 'PyPI upload token',
    source: String.raw`pypi-AgEIcHlwaS5vcmc[\w-]{50,1000}`,
  },
  // Developer platforms
  {
    id: 'databricks-api-token',
    label: 'Databricks API token',
    source: String.raw`\bdapi[a-f0-9]{32}(?:-\d)?\b`,
  },
  {
    id: 'hashicorp-tf-api-token',
    label: 'Terraform Cloud API token',
    source: String.raw`\b[a-zA-Z0-9]{14}\.atlasv1\.[a-zA-Z0-9\-_=]{60,70}\b`,
  },
  { id: 'pulumi-api-token', label: 'Pulumi API token', source: String.raw`\bpul-[a-f0-9]{40}\b` },
  {
    id: 'postman-api-token',
    label: 'Postman API token',
    source: String.raw`\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}\b`,
  },
  { id: 'linear-api-key', label: 'Linear API key', source: String.raw`\blin_api_[a-zA-Z0-9]{40}\b` },
  { id: 'doppler-api-token', label: 'Doppler API token', source: String.raw`\bdp\.pt\.[a-zA-Z0-9]{43}\b` },
  // Observability
  {
    id: 'grafana-api-key',
    label: 'Grafana API key',
    source: String.raw`\beyJrIjoi[A-Za-z0-9]{70,400}={0,3}`,
  },
  {
    id: 'grafana-cloud-api-token',
    label: 'Grafana Cloud API token',
    source: String.raw`\bglc_[A-Za-z0-9+/]{32,400}={0,3}`,
  },
  {
    id: 'grafana-service-account-token',
    label: 'Grafana service account token',
    source: String.raw`\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b`,
  },
  { id: 'sentry-user-token', label: 'Sentry user token', source: String.raw`\bsntryu_[a-f0-9]{64}\b` },
  {
    id: 'sentry-org-token',
    label: 'Sentry organization token',
    source: String.raw`\bsntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,200}(?:LCJyZWdpb25fdXJs|InJlZ2lvbl91cmwi|cmVnaW9uX3VybCI6)[a-zA-Z0-9+/]{10,200}={0,2}_[a-zA-Z0-9+/]{43}`,
  },
  // Payments and commerce
  {
    id: 'stripe-access-token',
    label: 'Stripe API key',
    source: String.raw`\b(?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99}\b`,
  },
  { id: 'shopify-access-token', label: 'Shopify access token', source: 'shpat_[a-fA-F0-9]{32}' },
  { id: 'shopify-shared-secret', label: 'Shopify shared secret', source: 'shpss_[a-fA-F0-9]{32}' },
  {
    id: 'shopify-custom-access-token',
    label: 'Shopify custom app access token',
    source: 'shpca_[a-fA-F0-9]{32}',
  },
  {
    id: 'shopify-private-app-access-token',
    label: 'Shopify private app access token',
    source: 'shppa_[a-fA-F0-9]{32}',
  },
  // Keys
  {
    id: 'age-secret-key',
    label: 'age secret key',
    source: 'AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}',
  },
  {
    id: 'private-key',
    label: 'Private key (PEM)',
    // Bounded body so a BEGIN line with no END cannot make the scan quadratic.
    source: String.raw`-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64,16384}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`,
  },
];

interface CompiledRule {
  rule: SecretRule;
  regex: RegExp;
}

const COMPILED: readonly CompiledRule[] = SECRET_RULES.map((rule) => ({
  rule,
  regex: new RegExp(rule.source, `gd${rule.flags ?? ''}`),
}));

/** One entry per rule that matched (in rule order), never the matched text. */
export function scanForSecrets(text: string): SecretMatch[] {
  if (typeof text !== 'string' || text === '') return [];
  const found: SecretMatch[] = [];
  for (const { rule, regex } of COMPILED) {
    regex.lastIndex = 0;
    if (regex.test(text)) found.push({ ruleId: rule.id, label: rule.label });
  }
  return found;
}

export const REDACTED = '[REDACTED]';

/** Replaces every match of every rule (its `secret` group when it has one) with `[REDACTED]`. */
export function redactSecrets(text: string): string {
  if (typeof text !== 'string' || text === '') return text;
  const ranges: Array<[number, number]> = [];
  for (const { regex } of COMPILED) {
    regex.lastIndex = 0;
    for (const match of text.matchAll(regex)) {
      const span = match.indices?.groups?.secret ?? match.indices?.[0];
      if (span && span[1] > span[0]) ranges.push([span[0], span[1]]);
    }
  }
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = '';
  let cursor = 0;
  for (const [start, end] of ranges) {
    if (end <= cursor) continue;
    if (start >= cursor) {
      out += text.slice(cursor, start) + REDACTED;
    }
    cursor = end;
  }
  return out + text.slice(cursor);
}
