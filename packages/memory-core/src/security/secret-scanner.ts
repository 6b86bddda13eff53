// Credential patterns for the provider families of gitleaks' public rule set (rule ids follow gitleaks' ids so
// a finding can be looked up there), written for this scanner: a keyword prefilter, a pattern per rule, and a
// filter that drops documented placeholders (`AKIA…EXAMPLE`, `ghp_xxxx…`, `your-api-key`, repeated or
// sequential characters) and low-entropy values. Two kinds of pattern:
//   - prefixed tokens (`ghp_…`, `hvs.…`, `xoxb-…`) that are recognisable anywhere;
//   - keyed values (`DATADOG_API_KEY = "<40 alnum>"`): a provider name on the left of an assignment, a value of
//     the provider's format on the right. A generic rule does the same for words like `token`/`secret` with an
//     entropy floor and a stop-word list, so ordinary notes ("token_limit: 4096") stay clean.
// Used to keep secrets out of team memory, which is shared with every collaborator, and to redact the recall
// query. Results name the rule, never the matched text, so a report can be logged without leaking what it
// found. Synchronous, no dependencies; a 25 KB memory file scans in well under a millisecond per rule that
// survives the prefilter (bench/secrets.ts measures it).

export interface SecretRule {
  id: string;
  label: string;
  /** Regex source (JS syntax). A named group `secret` marks the value; the whole match otherwise. */
  source: string;
  /** More sources for the same rule (each may carry its own `secret` group). */
  also?: readonly string[];
  flags?: string;
  /** Lower-case strings one of which must occur in the text before the patterns run. */
  keywords: readonly string[];
  /** Minimum Shannon entropy (bits per character) of the value. */
  entropy?: number;
  /** The format itself contains a run of one character (e.g. `AAAAAAAAAA`): skip the repeated-run check. */
  runsOk?: boolean;
  /** Extra check on the value; false drops the match. */
  accept?: (value: string, match: RegExpExecArray, text: string) => boolean;
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
const RIGHT = `(?:$|[\\\\'"\`\\s<),@|])`;
/** A token ends where no more token characters follow (a sentence's full stop or a quote may). */
const END = '(?![A-Za-z0-9_-])';
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
/** Between the identifier and the value: `=`, `:`, `:=`, `::=`, `?=`, `=>`, `||`, `,`, `>` (XML). */
const ASSIGN = String.raw`[\w.\- \t]{0,20}?['"]?[ \t]{0,3}(?:=>|:{1,3}=|\?=|\|\||[=:,>])[\s'"\x60=]{0,5}`;

/** A provider identifier on the left of an assignment and a value of the provider's format on the right. */
function keyed(identifiers: string, value: string): string {
  return `(?:${identifiers})${ASSIGN}(?<secret>${value})${END}`;
}
/** A token with a distinctive prefix, anywhere in the text. */
function prefixed(body: string, left = '\\b'): string {
  return `${left}(?<secret>${body})${END}`;
}

const ACRONYMS: Record<string, string> = {
  api: 'API',
  aws: 'AWS',
  gcp: 'GCP',
  jwt: 'JWT',
  id: 'ID',
  pat: 'PAT',
  ca: 'CA',
  url: 'URL',
  cicd: 'CI/CD',
  oauth: 'OAuth',
  github: 'GitHub',
  gitlab: 'GitLab',
  ptt: 'pipeline trigger token',
  rrt: 'runner registration token',
  scim: 'SCIM',
  yaml: 'YAML',
  pkcs12: 'PKCS#12',
  tf: 'Terraform',
  ad: 'AD',
  npm: 'npm',
  pypi: 'PyPI',
  droneci: 'Drone CI',
  travisci: 'Travis CI',
  digitalocean: 'DigitalOcean',
  huggingface: 'Hugging Face',
  openai: 'OpenAI',
  sendgrid: 'SendGrid',
  hubspot: 'HubSpot',
  jfrog: 'JFrog',
  launchdarkly: 'LaunchDarkly',
  linkedin: 'LinkedIn',
  messagebird: 'MessageBird',
  nytimes: 'New York Times',
  planetscale: 'PlanetScale',
  privateai: 'Private AI',
  rapidapi: 'RapidAPI',
  rubygems: 'RubyGems',
  sendinblue: 'Sendinblue',
  settlemint: 'SettleMint',
  sourcegraph: 'Sourcegraph',
  squarespace: 'Squarespace',
  sumologic: 'Sumo Logic',
  clickhouse: 'ClickHouse',
  cloudflare: 'Cloudflare',
  gocardless: 'GoCardless',
  freshbooks: 'FreshBooks',
  flyio: 'Fly.io',
  frameio: 'Frame.io',
  mailchimp: 'Mailchimp',
  newrelic: 'New Relic',
  easypost: 'EasyPost',
  intra42: '42 Intra',
  '1password': '1Password',
};
function labelOf(id: string): string {
  const words = id.replace(/^new-relic/, 'newrelic').split('-');
  return words.map((w, i) => ACRONYMS[w] ?? (i === 0 ? w.charAt(0).toUpperCase() + w.slice(1) : w)).join(' ');
}

type RuleSpec = Omit<SecretRule, 'label'> & { label?: string };

/** Keyed rules: [id, identifiers (regex alternation), value pattern, entropy?]. Case-insensitive. */
const KEYED: ReadonlyArray<readonly [string, string, string, number?]> = [
  ['adafruit-api-key', 'adafruit', '[a-z0-9_-]{32}'],
  ['adobe-client-id', 'adobe', '[a-f0-9]{32}', 2],
  ['airtable-api-key', 'airtable', '[a-z0-9]{17}'],
  ['algolia-api-key', 'algolia', '[a-z0-9]{32}'],
  ['alibaba-secret-key', 'alibaba', '[a-z0-9]{30}', 2],
  ['asana-client-id', 'asana', '[0-9]{16}'],
  ['asana-client-secret', 'asana', '[a-z0-9]{32}'],
  ['beamer-api-token', 'beamer', 'b_[a-z0-9=_-]{44}'],
  ['bitbucket-client-secret', 'bitbucket', '[a-z0-9=_-]{64}'],
  ['bittrex-access-key', 'bittrex', '[a-z0-9]{32}'],
  ['bittrex-secret-key', 'bittrex', '[a-z0-9]{32}'],
  ['cloudflare-api-key', 'cloudflare', '[a-z0-9_-]{40}', 2],
  ['cloudflare-global-api-key', 'cloudflare', '[a-f0-9]{37}', 2],
  ['codecov-access-token', 'codecov', '[a-z0-9]{32}'],
  ['cohere-api-token', 'cohere|co_api_key', '[a-z0-9]{40}', 4],
  ['coinbase-access-token', 'coinbase', '[a-z0-9_-]{64}'],
  ['confluent-access-token', 'confluent', '[a-z0-9]{16}'],
  ['confluent-secret-key', 'confluent', '[a-z0-9]{64}'],
  ['contentful-delivery-api-token', 'contentful', '[a-z0-9=_-]{43}'],
  ['datadog-access-token', 'datadog|dd[_-]?(?:api|app(?:lication)?)[_-]?key', '[a-z0-9]{40}|[a-f0-9]{32}'],
  ['discord-api-token', 'discord', '[a-f0-9]{64}'],
  ['discord-client-id', 'discord', '[0-9]{18}', 2],
  ['discord-client-secret', 'discord', '[a-z0-9=_-]{32}', 2],
  ['droneci-access-token', 'droneci|drone[_-]token', '[a-z0-9]{32}'],
  ['dropbox-api-token', 'dropbox', '[a-z0-9]{15}'],
  ['dropbox-short-lived-api-token', 'dropbox', 'sl\\.[a-z0-9=_-]{135}'],
  ['facebook-secret', 'facebook', '[a-f0-9]{32}', 3],
  ['fastly-api-token', 'fastly', '[a-z0-9=_-]{32}'],
  ['finicity-api-token', 'finicity', '[a-f0-9]{32}'],
  ['finicity-client-secret', 'finicity', '[a-z0-9]{20}'],
  ['finnhub-access-token', 'finnhub', '[a-z0-9]{20}'],
  ['flickr-access-token', 'flickr', '[a-z0-9]{32}'],
  ['freshbooks-access-token', 'freshbooks', '[a-z0-9]{64}'],
  ['gitter-access-token', 'gitter', '[a-z0-9_-]{40}'],
  ['gocardless-api-token', 'gocardless', 'live_[a-z0-9=_-]{40}'],
  ['heroku-api-key', 'heroku', UUID],
  ['hubspot-api-key', 'hubspot', UUID],
  ['intercom-api-key', 'intercom', '[a-z0-9=_-]{60}'],
  ['jfrog-api-key', 'jfrog|artifactory|bintray|xray', '[a-z0-9]{73}'],
  ['jfrog-identity-token', 'jfrog|artifactory|bintray|xray', '[a-z0-9]{64}'],
  ['kraken-access-token', 'kraken', '[a-z0-9/=_+-]{80,90}'],
  ['kucoin-access-token', 'kucoin', '[a-f0-9]{24}'],
  ['kucoin-secret-key', 'kucoin', UUID],
  ['launchdarkly-access-token', 'launchdarkly', '[a-z0-9=_-]{40}'],
  ['linear-client-secret', 'linear', '[a-f0-9]{32}', 2],
  ['linkedin-client-id', 'linked[_-]?in', '[a-z0-9]{14}', 2],
  ['linkedin-client-secret', 'linked[_-]?in', '[a-z0-9]{16}', 2],
  ['lob-api-key', 'lob', '(?:live|test)_[a-f0-9]{35}'],
  ['lob-pub-api-key', 'lob', '(?:test|live)_pub_[a-f0-9]{31}'],
  ['looker-client-id', 'looker', '[a-z0-9]{20}'],
  ['looker-client-secret', 'looker', '[a-z0-9]{24}'],
  ['mailchimp-api-key', 'mailchimp', '[a-f0-9]{32}-us\\d\\d'],
  ['mailgun-private-api-token', 'mailgun', 'key-[a-f0-9]{32}'],
  ['mailgun-pub-key', 'mailgun', 'pubkey-[a-f0-9]{32}'],
  ['mailgun-signing-key', 'mailgun', '[a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8}'],
  ['mapbox-api-token', 'mapbox', '[ps]k\\.[a-z0-9]{60}\\.[a-z0-9]{22}'],
  ['messagebird-api-token', 'message[_-]?bird', '[a-z0-9]{25}'],
  ['messagebird-client-id', 'message[_-]?bird', UUID],
  ['netlify-access-token', 'netlify', '[a-z0-9=_-]{40,46}'],
  ['new-relic-user-api-id', 'new-relic|newrelic|new_relic', '[a-z0-9]{64}'],
  ['nytimes-access-token', 'nytimes|new-york-times|newyorktimes', '[a-z0-9=_-]{32}'],
  ['plaid-api-token', 'plaid', `access-(?:sandbox|development|production)-${UUID}`],
  ['plaid-client-id', 'plaid', '[a-z0-9]{24}', 3.5],
  ['plaid-secret-key', 'plaid', '[a-z0-9]{30}', 3.5],
  ['rapidapi-access-token', 'rapidapi', '[a-z0-9_-]{50}'],
  ['sendbird-access-id', 'sendbird', UUID],
  ['sendbird-access-token', 'sendbird', '[a-f0-9]{40}'],
  ['sentry-access-token', 'sentry', '[a-f0-9]{64}', 3],
  [
    'sidekiq-secret',
    'bundle_enterprise__contribsys__com|bundle_gems__contribsys__com',
    '[a-f0-9]{8}:[a-f0-9]{8}',
  ],
  ['snyk-api-token', 'snyk[_.-]?(?:(?:api|oauth)[_.-]?)?(?:key|token)', UUID],
  ['sonar-api-token', 'sonar[_.-]?(?:login|token)', '(?:squ_|sqp_|sqa_)?[a-z0-9=_-]{40}'],
  ['squarespace-access-token', 'squarespace', UUID],
  ['travisci-access-token', 'travis', '[a-z0-9]{22}'],
  ['twitch-api-token', 'twitch', '[a-z0-9]{30}'],
  ['twitter-access-secret', 'twitter', '[a-z0-9]{45}'],
  ['twitter-access-token', 'twitter', '[0-9]{15,25}-[a-z0-9]{20,40}'],
  ['twitter-api-key', 'twitter', '[a-z0-9]{25}'],
  ['twitter-api-secret', 'twitter', '[a-z0-9]{50}'],
  ['yandex-access-token', 'yandex', 't1\\.[a-z0-9_-]+={0,2}\\.[a-z0-9_-]{86}={0,2}'],
  ['yandex-api-key', 'yandex', 'AQVN[a-z0-9_-]{35,38}'],
  ['yandex-aws-access-token', 'yandex', 'YC[a-z0-9_-]{38}'],
  ['zendesk-secret-key', 'zendesk', '[a-z0-9]{40}'],
];

function keywordsOf(identifiers: string): string[] {
  // The literal stems of an alternation (enough for a prefilter: each alternative starts with one).
  return identifiers
    .split('|')
    .map((alt) => (alt.match(/^[a-z0-9_]+/i)?.[0] ?? alt).toLowerCase())
    .filter((k) => k.length > 0);
}

const hasDigit = (v: string) => /\d/.test(v);
const notOnlyLetters = (v: string) => !/^[a-zA-Z_.\-"]+$/.test(v);

// Words that, inside a generic `key = value`'s value, mark it as ordinary text or an identifier (a version,
// a ticket, a setting name) rather than a credential.
const GENERIC_STOPWORDS = [
  'about',
  'access',
  'account',
  'action',
  'admin',
  'alpha',
  'amazon',
  'android',
  'apache',
  'archive',
  'asset',
  'async',
  'audit',
  'auth',
  'backend',
  'backup',
  'basic',
  'batch',
  'bearer',
  'beta',
  'binary',
  'block',
  'branch',
  'bucket',
  'build',
  'bundle',
  'cache',
  'change',
  'channel',
  'check',
  'chrome',
  'client',
  'cloud',
  'cluster',
  'commit',
  'common',
  'config',
  'console',
  'content',
  'context',
  'cookie',
  'create',
  'custom',
  'daemon',
  'data',
  'debug',
  'default',
  'delete',
  'demo',
  'deploy',
  'design',
  'detail',
  'develop',
  'device',
  'docker',
  'domain',
  'draft',
  'email',
  'enable',
  'endpoint',
  'engine',
  'error',
  'event',
  'example',
  'export',
  'false',
  'feature',
  'field',
  'file',
  'filter',
  'final',
  'flow',
  'folder',
  'format',
  'gateway',
  'github',
  'gitlab',
  'google',
  'group',
  'handler',
  'hash',
  'header',
  'hello',
  'helper',
  'hotfix',
  'http',
  'image',
  'import',
  'index',
  'input',
  'install',
  'internal',
  'issue',
  'java',
  'json',
  'kafka',
  'label',
  'latest',
  'layer',
  'legacy',
  'level',
  'library',
  'limit',
  'linux',
  'local',
  'login',
  'logout',
  'main',
  'manager',
  'master',
  'media',
  'merge',
  'message',
  'metric',
  'migrat',
  'mobile',
  'mock',
  'model',
  'module',
  'monitor',
  'name',
  'network',
  'node',
  'null',
  'oauth',
  'object',
  'option',
  'order',
  'output',
  'package',
  'page',
  'param',
  'parse',
  'path',
  'patch',
  'payment',
  'pipeline',
  'plugin',
  'policy',
  'prefix',
  'preview',
  'private',
  'prod',
  'profile',
  'project',
  'provider',
  'proxy',
  'public',
  'python',
  'query',
  'queue',
  'react',
  'redis',
  'refresh',
  'region',
  'release',
  'remote',
  'report',
  'request',
  'required',
  'resource',
  'response',
  'rollout',
  'route',
  'runner',
  'sample',
  'sandbox',
  'schema',
  'scope',
  'script',
  'search',
  'secret',
  'server',
  'service',
  'session',
  'setting',
  'shared',
  'snapshot',
  'source',
  'stage',
  'staging',
  'standard',
  'start',
  'state',
  'static',
  'status',
  'storage',
  'store',
  'stream',
  'string',
  'style',
  'support',
  'system',
  'table',
  'target',
  'task',
  'team',
  'template',
  'tenant',
  'test',
  'text',
  'theme',
  'ticket',
  'timeout',
  'token',
  'tool',
  'true',
  'type',
  'update',
  'upload',
  'user',
  'value',
  'vault',
  'version',
  'view',
  'webhook',
  'widget',
  'window',
  'worker',
  'write',
  'yaml',
];
const GENERIC_STOPWORD_RE = new RegExp(GENERIC_STOPWORDS.join('|'), 'i');
// Identifiers that contain a generic keyword but name something that is not a credential.
const GENERIC_BENIGN_NAME =
  /(?:access(?:ibility|or|[_.-]?(?:id|level|log|mode|control|list))|random[_.-]?access|api[_.-]?(?:id|name|version|url|uri|base|host|endpoint|path|docs?|level|group)|rapid|capital|author|authenticat|authoriz|credentials?[_.-]?(?:id|provider|type|helper)|with[_.-]?credentials|(?:bucket|foreign|hot|idx|natural|primary|pub(?:lic)?|schema|sequence|sort|partition|cache|idempotency|dedup|routing|shard|object|map|lookup|license|ssh|gpg|pgp)[_.-]?key|key[_.-]?(?:alias|board|code|frame|id|length|name|pair|press(?:ed)?|ring|size|stone|store|tab|type|word|file|path|format|version|spec|usage|prefix|count|binding|s)|monkey|turkey|donkey|hockey|jockey|keying|keyof|(?:secret|token)[_.-]?(?:name|length|size|file|path|url|uri|endpoint|type|ttl|count|limit|budget|expir\w*|lifetime|id|ref|source|provider|kind)|tokeni[sz]|csrf[_.-]?token|xsrf|public[_.-]?token|passw(?:or)?d[_.-]?(?:policy|length|hash|reset|field|prompt|file|min|max|rule))/i;

function genericAccept(value: string, match: RegExpExecArray, text: string): boolean {
  if (!notOnlyLetters(value)) return false;
  if (/^[\d.:_-]+$/.test(value)) return false; // versions, dates, numbers, times
  if (/(?:^|[^\w])v?\d+\.\d+\.\d+|^v?\d+\.\d+/.test(value)) return false; // versions (keycloak-17.0.1)
  if (/^(?:\/|\.\.?\/|~\/|[a-z]+:\/\/)/i.test(value)) return false; // paths and URLs
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) return false; // an id
  if (/^[A-Z][A-Z0-9]*-\d+$/.test(value)) return false; // a ticket (ENG-1234)
  if (GENERIC_STOPWORD_RE.test(value)) return false;
  // The whole identifier on the left of the assignment (the keyword may sit inside a longer name).
  let start = match.index;
  while (start > 0 && /[\w.-]/.test(text.charAt(start - 1)) && match.index - start < 60) start -= 1;
  const eq = match[0].search(/(?:=>|:{1,3}=|\?=|\|\||[=:,>])/);
  const name = text.slice(start, match.index + Math.max(eq, 0));
  return !GENERIC_BENIGN_NAME.test(name);
}

const SPECS: readonly RuleSpec[] = [
  // Cloud providers
  {
    id: 'aws-access-token',
    label: 'AWS access key ID',
    source: prefixed('(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}'),
    keywords: ['a3t', 'akia', 'asia', 'abia', 'acca'],
    entropy: 3,
  },
  {
    id: 'aws-amazon-bedrock-api-key-long-lived',
    label: 'Amazon Bedrock API key (long-lived)',
    source: prefixed('ABSK[A-Za-z0-9+/]{109,269}={0,2}'),
    keywords: ['absk'],
    entropy: 3,
  },
  {
    id: 'aws-amazon-bedrock-api-key-short-lived',
    label: 'Amazon Bedrock API key (short-lived)',
    source: prefixed('bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%]{16,4000}'),
    keywords: ['bedrock-api-key-'],
    entropy: 3,
  },
  {
    id: 'gcp-api-key',
    label: 'Google Cloud API key',
    source: prefixed('AIza[\\w-]{35}'),
    keywords: ['aiza'],
    entropy: 4,
  },
  {
    id: 'azure-ad-client-secret',
    label: 'Azure AD client secret',
    source: `${LEFT}(?<secret>[a-zA-Z0-9_~.]{3}\\dQ~[a-zA-Z0-9_~.-]{31,34})${RIGHT}`,
    keywords: ['q~'],
    entropy: 3,
  },
  {
    id: 'alibaba-access-key-id',
    source: prefixed('LTAI[a-zA-Z0-9]{20}'),
    keywords: ['ltai'],
    entropy: 2,
  },
  {
    id: 'digitalocean-pat',
    label: 'DigitalOcean personal access token',
    source: prefixed('dop_v1_[a-f0-9]{64}'),
    keywords: ['dop_v1_'],
    entropy: 3,
  },
  {
    id: 'digitalocean-access-token',
    label: 'DigitalOcean OAuth access token',
    source: prefixed('doo_v1_[a-f0-9]{64}'),
    keywords: ['doo_v1_'],
    entropy: 3,
  },
  {
    id: 'digitalocean-refresh-token',
    label: 'DigitalOcean OAuth refresh token',
    source: prefixed('dor_v1_[a-f0-9]{64}'),
    keywords: ['dor_v1_'],
  },
  {
    id: 'cloudflare-origin-ca-key',
    source: prefixed('v1\\.0-[a-f0-9]{24}-[a-f0-9]{146}'),
    keywords: ['v1.0-'],
    entropy: 2,
  },
  {
    id: 'flyio-access-token',
    label: 'Fly.io access token',
    source: prefixed('fo1_[\\w-]{43}|fm1[ar]_[a-zA-Z0-9+/]{100,}={0,3}|fm2_[a-zA-Z0-9+/]{100,}={0,3}'),
    keywords: ['fo1_', 'fm1', 'fm2_'],
    entropy: 4,
  },
  {
    id: 'heroku-api-key-v2',
    label: 'Heroku API key',
    source: prefixed('HRKU-AA[0-9a-zA-Z_-]{58}'),
    keywords: ['hrku-aa'],
    entropy: 4,
  },
  {
    id: 'openshift-user-token',
    label: 'OpenShift user token',
    source: prefixed('sha256~[\\w-]{43}'),
    keywords: ['sha256~'],
    entropy: 3.5,
  },
  {
    id: 'scalingo-api-token',
    source: prefixed('tk-us-[\\w-]{48}'),
    keywords: ['tk-us-'],
    entropy: 2,
  },
  // AI providers
  {
    id: 'anthropic-api-key',
    label: 'Anthropic API key',
    source: prefixed(`${ANTHROPIC_PREFIX}-[a-zA-Z0-9_\\-]{93}AA`),
    keywords: [ANTHROPIC_PREFIX],
  },
  {
    id: 'anthropic-admin-api-key',
    label: 'Anthropic admin API key',
    source: prefixed(`${ANTHROPIC_ADMIN_PREFIX}-[a-zA-Z0-9_\\-]{93}AA`),
    keywords: [ANTHROPIC_ADMIN_PREFIX],
  },
  {
    id: 'openai-api-key',
    label: 'OpenAI API key',
    source: prefixed(
      'sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20}',
    ),
    keywords: ['t3blbkfj'],
    entropy: 3,
  },
  {
    id: 'huggingface-access-token',
    label: 'Hugging Face access token',
    source: `${LEFT}(?<secret>hf_[a-zA-Z]{34})${RIGHT}`,
    keywords: ['hf_'],
    entropy: 2,
  },
  {
    id: 'huggingface-organization-api-token',
    source: prefixed('api_org_[a-zA-Z]{34}'),
    keywords: ['api_org_'],
    entropy: 2,
  },
  {
    id: 'perplexity-api-key',
    source: prefixed('pplx-[a-zA-Z0-9]{48}'),
    keywords: ['pplx-'],
    entropy: 4,
  },
  {
    id: 'privateai-api-token',
    source: keyed('private[_-]?ai', '[a-z0-9]{32}'),
    flags: 'i',
    keywords: ['privateai', 'private_ai', 'private-ai'],
    entropy: 3,
  },
  // Source hosting
  {
    id: 'github-pat',
    label: 'GitHub personal access token',
    source: 'ghp_[0-9a-zA-Z]{36}',
    keywords: ['ghp_'],
    entropy: 3,
  },
  {
    id: 'github-fine-grained-pat',
    label: 'GitHub fine-grained token',
    source: String.raw`github_pat_\w{82}`,
    keywords: ['github_pat_'],
    entropy: 3,
  },
  {
    id: 'github-app-token',
    label: 'GitHub app token',
    source: '(?:ghu|ghs)_[0-9a-zA-Z]{36}',
    keywords: ['ghu_', 'ghs_'],
    entropy: 3,
  },
  {
    id: 'github-oauth',
    label: 'GitHub OAuth token',
    source: 'gho_[0-9a-zA-Z]{36}',
    keywords: ['gho_'],
    entropy: 3,
  },
  {
    id: 'github-refresh-token',
    label: 'GitHub refresh token',
    source: 'ghr_[0-9a-zA-Z]{36}',
    keywords: ['ghr_'],
    entropy: 3,
  },
  {
    id: 'gitlab-pat',
    label: 'GitLab personal access token',
    source: prefixed('glpat-[\\w-]{20}', ''),
    keywords: ['glpat-'],
    entropy: 3,
  },
  {
    id: 'gitlab-pat-routable',
    source: prefixed('glpat-[0-9a-zA-Z_-]{27,300}\\.[0-9a-z]{2}[0-9a-z]{7}'),
    keywords: ['glpat-'],
    entropy: 4,
  },
  {
    id: 'gitlab-cicd-job-token',
    source: prefixed('glcbt-[0-9a-zA-Z]{1,5}_[0-9a-zA-Z_-]{20}', ''),
    keywords: ['glcbt-'],
    entropy: 3,
  },
  {
    id: 'gitlab-deploy-token',
    label: 'GitLab deploy token',
    source: prefixed('gldt-[0-9a-zA-Z_-]{20}', ''),
    keywords: ['gldt-'],
    entropy: 3,
  },
  {
    id: 'gitlab-feature-flag-client-token',
    source: prefixed('glffct-[0-9a-zA-Z_-]{20}', ''),
    keywords: ['glffct-'],
    entropy: 3,
  },
  {
    id: 'gitlab-feed-token',
    source: prefixed('glft-[0-9a-zA-Z_-]{20}', ''),
    keywords: ['glft-'],
    entropy: 3,
  },
  {
    id: 'gitlab-incoming-mail-token',
    source: prefixed('glimt-[0-9a-zA-Z_-]{25}', ''),
    keywords: ['glimt-'],
    entropy: 3,
  },
  {
    id: 'gitlab-kubernetes-agent-token',
    source: prefixed('glagent-[0-9a-zA-Z_-]{50}', ''),
    keywords: ['glagent-'],
    entropy: 3,
  },
  {
    id: 'gitlab-oauth-app-secret',
    label: 'GitLab OAuth app secret',
    source: prefixed('gloas-[0-9a-zA-Z_-]{64}', ''),
    keywords: ['gloas-'],
    entropy: 3,
  },
  {
    id: 'gitlab-ptt',
    label: 'GitLab pipeline trigger token',
    source: prefixed('glptt-[0-9a-f]{40}', ''),
    keywords: ['glptt-'],
    entropy: 3,
  },
  {
    id: 'gitlab-rrt',
    label: 'GitLab runner registration token',
    source: prefixed('GR1348941[\\w-]{20}', ''),
    keywords: ['gr1348941'],
    entropy: 3,
  },
  {
    id: 'gitlab-runner-authentication-token',
    label: 'GitLab runner token',
    source: prefixed('glrt-[0-9a-zA-Z_-]{20}', ''),
    keywords: ['glrt-'],
    entropy: 3,
  },
  {
    id: 'gitlab-runner-authentication-token-routable',
    label: 'GitLab runner token (routable)',
    source: prefixed('glrt-t\\d_[0-9a-zA-Z_-]{27,300}\\.[0-9a-z]{2}[0-9a-z]{7}'),
    keywords: ['glrt-'],
    entropy: 4,
  },
  {
    id: 'gitlab-scim-token',
    label: 'GitLab SCIM token',
    source: prefixed('glsoat-[0-9a-zA-Z_-]{20}', ''),
    keywords: ['glsoat-'],
    entropy: 3,
  },
  {
    id: 'gitlab-session-cookie',
    source: `_gitlab_session=(?<secret>[0-9a-z]{32})${END}`,
    keywords: ['_gitlab_session='],
    entropy: 3,
  },
  {
    id: 'atlassian-api-token',
    source: keyed('atlassian|confluence|jira', '[a-z0-9]{20}[a-f0-9]{4}'),
    also: [prefixed('ATATT3[A-Za-z0-9_=-]{186}')],
    keywords: ['atlassian', 'confluence', 'jira', 'atatt3'],
    flags: 'i',
    entropy: 3.5,
  },
  {
    id: 'bitbucket-client-id',
    source: keyed('bitbucket', '[a-z0-9]{32}'),
    flags: 'i',
    keywords: ['bitbucket'],
  },
  {
    id: 'sourcegraph-access-token',
    source: prefixed('sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}|sgp_[a-fA-F0-9]{40}'),
    also: [keyed('sourcegraph', '[a-f0-9]{40}')],
    flags: 'i',
    keywords: ['sgp_', 'sourcegraph'],
    entropy: 3,
  },
  // Messaging and communications
  {
    id: 'slack-bot-token',
    label: 'Slack bot token',
    source: 'xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*',
    keywords: ['xoxb'],
    entropy: 3,
  },
  {
    id: 'slack-user-token',
    label: 'Slack user token',
    source: 'xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}',
    keywords: ['xoxp-', 'xoxe-'],
    entropy: 2,
  },
  {
    id: 'slack-app-token',
    label: 'Slack app-level token',
    source: String.raw`xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+`,
    flags: 'i',
    keywords: ['xapp'],
    entropy: 2,
  },
  {
    id: 'slack-config-access-token',
    source: 'xoxe\\.xox[bp]-\\d-[A-Z0-9]{163,166}',
    flags: 'i',
    keywords: ['xoxe.xoxb-', 'xoxe.xoxp-'],
    entropy: 2,
  },
  {
    id: 'slack-config-refresh-token',
    source: 'xoxe-\\d-[A-Z0-9]{146}',
    flags: 'i',
    keywords: ['xoxe-'],
    entropy: 2,
  },
  {
    id: 'slack-legacy-bot-token',
    source: prefixed('xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}', ''),
    keywords: ['xoxb'],
    entropy: 2,
  },
  {
    id: 'slack-legacy-token',
    source: 'xox[os]-\\d+-\\d+-\\d+-[a-fA-F\\d]+',
    keywords: ['xoxo', 'xoxs'],
    entropy: 2,
  },
  {
    id: 'slack-legacy-workspace-token',
    source: prefixed('xox[ar]-(?:\\d-)?[0-9a-zA-Z]{8,48}', ''),
    keywords: ['xoxa', 'xoxr'],
    entropy: 2,
  },
  {
    id: 'slack-webhook-url',
    label: 'Slack webhook URL',
    source:
      '(?:https?://)?hooks\\.slack\\.com/(?:services|workflows|triggers)/(?<secret>[A-Za-z0-9+/]{43,56})',
    keywords: ['hooks.slack.com'],
  },
  {
    id: 'microsoft-teams-webhook',
    label: 'Microsoft Teams webhook',
    source: `https://[a-z0-9]+\\.webhook\\.office\\.com/webhookb2/(?<secret>${UUID}@${UUID}/IncomingWebhook/[a-z0-9]{32}/${UUID})`,
    keywords: ['webhook.office.com'],
  },
  {
    id: 'twilio-api-key',
    label: 'Twilio API key',
    source: String.raw`\bSK[0-9a-fA-F]{32}\b`,
    keywords: ['sk'],
    entropy: 3,
  },
  {
    id: 'sendgrid-api-token',
    label: 'SendGrid API token',
    source: prefixed('SG\\.[a-zA-Z0-9=_\\-.]{66}'),
    keywords: ['sg.'],
    entropy: 2,
  },
  {
    id: 'sendinblue-api-token',
    source: prefixed('xkeysib-[a-f0-9]{64}-[a-zA-Z0-9]{16}'),
    keywords: ['xkeysib-'],
    entropy: 2,
  },
  {
    id: 'mattermost-access-token',
    source: keyed('mattermost', '[a-z0-9]{26}'),
    flags: 'i',
    keywords: ['mattermost'],
  },
  {
    id: 'telegram-bot-api-token',
    source: keyed('telegr', '[0-9]{5,16}:A[a-z0-9_-]{34}'),
    also: [prefixed('[0-9]{8,10}:AA[A-Za-z0-9_-]{33}')],
    flags: 'i',
    keywords: [':aa', 'telegr'],
  },
  // Package registries
  {
    id: 'npm-access-token',
    label: 'npm access token',
    source: prefixed('npm_[a-zA-Z0-9]{36}'),
    keywords: ['npm_'],
    entropy: 2,
  },
  {
    id: 'pypi-upload-token',
    label: 'PyPI upload token',
    source: String.raw`pypi-AgEIcHlwaS5vcmc[\w-]{50,1000}`,
    keywords: ['pypi-ageichlwas5vcmc'],
    entropy: 3,
  },
  {
    id: 'rubygems-api-token',
    source: prefixed('rubygems_[a-f0-9]{48}'),
    keywords: ['rubygems_'],
    entropy: 2,
  },
  {
    id: 'clojars-api-token',
    source: prefixed('CLOJARS_[a-zA-Z0-9]{60}', ''),
    flags: 'i',
    keywords: ['clojars_'],
    entropy: 2,
  },
  {
    id: 'artifactory-api-key',
    source: prefixed('AKCp[A-Za-z0-9]{69}'),
    keywords: ['akcp'],
    entropy: 4.5,
  },
  {
    id: 'artifactory-reference-token',
    source: prefixed('cmVmd[A-Za-z0-9]{59}'),
    keywords: ['cmvmd'],
    entropy: 4.5,
  },
  // Developer platforms
  {
    id: 'databricks-api-token',
    label: 'Databricks API token',
    source: prefixed('dapi[a-f0-9]{32}(?:-\\d)?'),
    keywords: ['dapi'],
    entropy: 3,
  },
  {
    id: 'hashicorp-tf-api-token',
    label: 'Terraform Cloud API token',
    source: prefixed('[a-zA-Z0-9]{14}\\.atlasv1\\.[a-zA-Z0-9\\-_=]{60,70}'),
    keywords: ['atlasv1'],
    entropy: 3.5,
  },
  {
    id: 'hashicorp-tf-password',
    label: 'Terraform password',
    source: `(?:administrator_login_password|password)[ \\t]{0,5}=[ \\t]{0,5}"(?<secret>[a-z0-9=_\\-]{8,20})"`,
    flags: 'i',
    keywords: ['password'],
    entropy: 2,
    accept: (value) => hasDigit(value) && notOnlyLetters(value),
  },
  {
    id: 'vault-service-token',
    label: 'Vault service token',
    source: prefixed('hvs\\.[\\w-]{90,120}'),
    also: [prefixed('s\\.[a-zA-Z0-9]{24}')],
    keywords: ['hvs.', 's.'],
    entropy: 3.5,
    accept: (value) => value.startsWith('hvs.') || hasDigit(value),
  },
  {
    id: 'vault-batch-token',
    label: 'Vault batch token',
    source: prefixed('hvb\\.[\\w-]{138,300}'),
    keywords: ['hvb.'],
    entropy: 4,
  },
  {
    id: 'pulumi-api-token',
    label: 'Pulumi API token',
    source: prefixed('pul-[a-f0-9]{40}'),
    keywords: ['pul-'],
    entropy: 2,
  },
  {
    id: 'postman-api-token',
    label: 'Postman API token',
    source: prefixed('PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}'),
    keywords: ['pmak-'],
    entropy: 3,
  },
  {
    id: 'linear-api-key',
    label: 'Linear API key',
    source: prefixed('lin_api_[a-zA-Z0-9]{40}'),
    keywords: ['lin_api_'],
    entropy: 2,
  },
  {
    id: 'doppler-api-token',
    label: 'Doppler API token',
    source: prefixed('dp\\.pt\\.[a-zA-Z0-9]{43}'),
    keywords: ['dp.pt.'],
    entropy: 2,
  },
  {
    id: 'planetscale-api-token',
    source: prefixed('pscale_tkn_[\\w=.-]{32,64}'),
    keywords: ['pscale_tkn_'],
    entropy: 3,
  },
  {
    id: 'planetscale-oauth-token',
    source: prefixed('pscale_oauth_[\\w=.-]{32,64}'),
    keywords: ['pscale_oauth_'],
    entropy: 3,
  },
  {
    id: 'planetscale-password',
    source: prefixed('pscale_pw_[\\w=.-]{32,64}'),
    keywords: ['pscale_pw_'],
    entropy: 3,
  },
  {
    id: 'prefect-api-token',
    source: prefixed('pnu_[a-zA-Z0-9]{36}'),
    keywords: ['pnu_'],
    entropy: 2,
  },
  {
    id: 'readme-api-token',
    label: 'ReadMe API token',
    source: prefixed('rdme_[a-z0-9]{70}'),
    keywords: ['rdme_'],
    entropy: 2,
  },
  {
    id: 'infracost-api-token',
    source: prefixed('ico-[a-zA-Z0-9]{32}'),
    keywords: ['ico-'],
    entropy: 3,
  },
  {
    id: 'harness-api-key',
    source: prefixed('(?:pat|sat)\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9]{24}\\.[a-zA-Z0-9]{20}'),
    keywords: ['pat.', 'sat.'],
  },
  {
    id: 'octopus-deploy-api-key',
    source: prefixed('API-[A-Z0-9]{26}'),
    keywords: ['api-'],
    entropy: 3,
  },
  {
    id: 'defined-networking-api-token',
    source: prefixed('dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52}'),
    flags: 'i',
    keywords: ['dnkey-'],
  },
  {
    id: 'authress-service-client-access-key',
    source: prefixed(
      '(?:sc|ext|scauth|authress)_[a-zA-Z0-9]{5,30}\\.[a-zA-Z0-9]{4,6}\\.acc[_-][a-z0-9-]{10,32}\\.[a-z0-9+/_=-]{30,120}',
    ),
    keywords: ['.acc_', '.acc-'],
    entropy: 2,
  },
  {
    id: 'frameio-api-token',
    label: 'Frame.io API token',
    source: prefixed('fio-u-[a-zA-Z0-9\\-_=]{64}'),
    keywords: ['fio-u-'],
  },
  {
    id: 'intra42-client-secret',
    source: prefixed('s-s4t2(?:ud|af)-[a-fA-F0-9]{64}'),
    keywords: ['s-s4t2ud-', 's-s4t2af-'],
    entropy: 3,
  },
  {
    id: 'typeform-api-token',
    source: prefixed('tfp_[a-zA-Z0-9\\-_.=]{59}'),
    keywords: ['tfp_'],
  },
  {
    id: '1password-secret-key',
    source: prefixed(
      'A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}',
    ),
    keywords: ['a3-'],
    entropy: 3.8,
  },
  {
    id: '1password-service-account-token',
    source: prefixed('ops_eyJ[a-zA-Z0-9+/]{250,}={0,3}'),
    keywords: ['ops_'],
    entropy: 4,
  },
  {
    id: 'settlemint-application-access-token',
    source: prefixed('sm_aat_[a-zA-Z0-9]{16}'),
    keywords: ['sm_aat'],
    entropy: 3,
  },
  {
    id: 'settlemint-personal-access-token',
    source: prefixed('sm_pat_[a-zA-Z0-9]{16}'),
    keywords: ['sm_pat'],
    entropy: 3,
  },
  {
    id: 'settlemint-service-access-token',
    source: prefixed('sm_sat_[a-zA-Z0-9]{16}'),
    keywords: ['sm_sat'],
    entropy: 3,
  },
  {
    id: 'clickhouse-cloud-api-secret-key',
    label: 'ClickHouse Cloud API secret key',
    source: prefixed('4b1d[A-Za-z0-9]{38}'),
    keywords: ['4b1d'],
    entropy: 3,
  },
  {
    id: 'maxmind-license-key',
    label: 'MaxMind license key',
    source: prefixed('[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk'),
    keywords: ['_mmk'],
    entropy: 4,
  },
  {
    id: 'notion-api-token',
    source: prefixed('ntn_[0-9]{11}[A-Za-z0-9]{35}'),
    keywords: ['ntn_'],
    entropy: 4,
  },
  {
    id: 'dynatrace-api-token',
    source: prefixed('dt0c01\\.[a-zA-Z0-9]{24}\\.[a-zA-Z0-9]{64}'),
    keywords: ['dt0c01.'],
    entropy: 4,
  },
  {
    id: 'duffel-api-token',
    source: prefixed('duffel_(?:test|live)_[a-zA-Z0-9_\\-=]{43}'),
    keywords: ['duffel_'],
    entropy: 2,
  },
  {
    id: 'easypost-api-token',
    label: 'EasyPost API token',
    source: prefixed('EZAK[a-zA-Z0-9]{54}'),
    keywords: ['ezak'],
    entropy: 2,
  },
  {
    id: 'easypost-test-api-token',
    label: 'EasyPost test API token',
    source: prefixed('EZTK[a-zA-Z0-9]{54}'),
    keywords: ['eztk'],
    entropy: 2,
  },
  {
    id: 'adobe-client-secret',
    source: prefixed('p8e-[a-zA-Z0-9]{32}'),
    keywords: ['p8e-'],
    entropy: 2,
  },
  {
    id: 'airtable-personnal-access-token',
    label: 'Airtable personal access token',
    source: prefixed('pat[a-zA-Z0-9]{14}\\.[a-f0-9]{64}'),
    keywords: ['pat'],
    entropy: 3,
  },
  {
    id: 'freemius-secret-key',
    source: `["']secret_key["']\\s*=>\\s*["'](?<secret>sk_[\\S]{29})["']`,
    flags: 'i',
    keywords: ['secret_key'],
  },
  {
    id: 'nuget-config-password',
    label: 'NuGet config password',
    source: '<add key="(?:ClearText)?Password"\\s*value="(?<secret>[^"]{8,})"\\s*/>',
    flags: 'i',
    keywords: ['<add key='],
    entropy: 1,
  },
  {
    id: 'curl-auth-header',
    label: 'Credential in a curl header',
    source: `\\bcurl\\b(?:[^\\n]|\\\\\\r?\\n){0,800}?[ \\t\\n](?:-H|--header)(?:=|[ \\t]{0,5})["']?(?:Authorization:[ \\t]{0,5}(?:Basic|Bearer|(?:Api-)?Token)[ \\t]+|(?:X-(?:[a-z]+-)?)?(?:Api-?)?(?:Key|Token):[ \\t]{0,5})(?<secret>[\\w=~@.+/-]{8,})`,
    flags: 'i',
    keywords: ['curl'],
    entropy: 2.75,
  },
  {
    id: 'curl-auth-user',
    label: 'Credential in a curl --user',
    source: `\\bcurl\\b(?:[^\\n]|\\\\\\r?\\n){0,800}?[ \\t\\n](?:-u|--user)(?:=|[ \\t]{1,5})["']?(?<secret>[^\\s:"'$]{3,}:[^\\s"'$]{3,})`,
    keywords: ['curl'],
    entropy: 2,
    accept: (value) => {
      const pass = value.slice(value.indexOf(':') + 1).replace(/["']$/, '');
      return !/^(?:pass(?:word)?|passwd|secret|token|x+|\*+|<[^>]*>|\{\{.*)$/i.test(pass);
    },
  },
  {
    id: 'kubernetes-secret-yaml',
    label: 'Kubernetes Secret data',
    source: `\\bkind:[ \\t]*["']?secret\\b["']?[\\s\\S]{0,200}?\\bdata:[\\s\\S]{0,100}?\\n[ \\t]+[\\w.-]+:[ \\t]*["']?(?<secret>[a-z0-9+/]{10,}={0,3})`,
    also: [
      `\\bdata:[\\s\\S]{0,100}?\\n[ \\t]+[\\w.-]+:[ \\t]*["']?(?<secret>[a-z0-9+/]{10,}={0,3})["']?[\\s\\S]{0,200}?\\bkind:[ \\t]*["']?secret\\b`,
    ],
    flags: 'i',
    keywords: ['kind: secret', 'kind: "secret"', "kind: 'secret'", 'kind:secret'],
    entropy: 2.5,
  },
  // Observability
  {
    id: 'grafana-api-key',
    label: 'Grafana API key',
    source: prefixed('eyJrIjoi[A-Za-z0-9]{70,400}={0,3}'),
    keywords: ['eyjrijoi'],
    entropy: 3,
  },
  {
    id: 'grafana-cloud-api-token',
    label: 'Grafana Cloud API token',
    source: prefixed('glc_[A-Za-z0-9+/]{32,400}={0,3}'),
    keywords: ['glc_'],
    entropy: 3,
  },
  {
    id: 'grafana-service-account-token',
    label: 'Grafana service account token',
    source: prefixed('glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}'),
    keywords: ['glsa_'],
    entropy: 3,
  },
  {
    id: 'sentry-user-token',
    label: 'Sentry user token',
    source: prefixed('sntryu_[a-f0-9]{64}'),
    keywords: ['sntryu_'],
    entropy: 3.5,
  },
  {
    id: 'sentry-org-token',
    label: 'Sentry organization token',
    source: String.raw`\bsntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,200}(?:LCJyZWdpb25fdXJs|InJlZ2lvbl91cmwi|cmVnaW9uX3VybCI6)[a-zA-Z0-9+/]{10,200}={0,2}_[a-zA-Z0-9+/]{43}`,
    keywords: ['sntrys_eyjpyxqio'],
    entropy: 4.5,
  },
  {
    id: 'new-relic-browser-api-token',
    label: 'New Relic browser API token',
    source: prefixed('NRJS-[a-f0-9]{19}'),
    keywords: ['nrjs-'],
  },
  {
    id: 'new-relic-insert-key',
    label: 'New Relic insert key',
    source: prefixed('NRII-[a-zA-Z0-9-]{32}', ''),
    keywords: ['nrii-'],
  },
  {
    id: 'new-relic-user-api-key',
    label: 'New Relic user API key',
    source: prefixed('NRAK-[a-zA-Z0-9]{27}'),
    keywords: ['nrak'],
  },
  // Payments and commerce
  {
    id: 'stripe-access-token',
    label: 'Stripe API key',
    source: prefixed('(?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99}'),
    keywords: ['sk_test', 'sk_live', 'sk_prod', 'rk_test', 'rk_live', 'rk_prod'],
    entropy: 2,
  },
  {
    id: 'square-access-token',
    source: prefixed('(?:EAAA|sq0atp-)[\\w-]{22,60}'),
    keywords: ['sq0atp-', 'eaaa'],
    entropy: 2,
  },
  {
    id: 'shippo-api-token',
    source: prefixed('shippo_(?:live|test)_[a-fA-F0-9]{40}'),
    keywords: ['shippo_'],
    entropy: 2,
  },
  {
    id: 'flutterwave-encryption-key',
    source: prefixed('FLWSECK_TEST-[a-hA-H0-9]{12}'),
    keywords: ['flwseck_test'],
    entropy: 2,
  },
  {
    id: 'flutterwave-public-key',
    source: prefixed('FLWPUBK_TEST-[a-hA-H0-9]{32}-X'),
    keywords: ['flwpubk_test'],
    entropy: 2,
  },
  {
    id: 'flutterwave-secret-key',
    source: prefixed('FLWSECK_TEST-[a-hA-H0-9]{32}-X'),
    keywords: ['flwseck_test'],
    entropy: 2,
  },
  {
    id: 'facebook-access-token',
    source: prefixed('\\d{15,16}(?:\\||%7C)[0-9a-zA-Z_-]{27,40}'),
    keywords: ['|', '%7c'],
    entropy: 3,
  },
  {
    id: 'facebook-page-access-token',
    source: prefixed('EAA[MC][a-zA-Z0-9]{100,}'),
    keywords: ['eaam', 'eaac'],
    entropy: 4,
  },
  {
    id: 'shopify-access-token',
    label: 'Shopify access token',
    source: 'shpat_[a-fA-F0-9]{32}',
    keywords: ['shpat_'],
    entropy: 2,
  },
  {
    id: 'shopify-shared-secret',
    label: 'Shopify shared secret',
    source: 'shpss_[a-fA-F0-9]{32}',
    keywords: ['shpss_'],
    entropy: 2,
  },
  {
    id: 'shopify-custom-access-token',
    label: 'Shopify custom app access token',
    source: 'shpca_[a-fA-F0-9]{32}',
    keywords: ['shpca_'],
    entropy: 2,
  },
  {
    id: 'shopify-private-app-access-token',
    label: 'Shopify private app access token',
    source: 'shppa_[a-fA-F0-9]{32}',
    keywords: ['shppa_'],
    entropy: 2,
  },
  {
    id: 'sidekiq-sensitive-url',
    label: 'Sidekiq credentials in a URL',
    source: 'https?://(?<secret>[a-f0-9]{8}:[a-f0-9]{8})@(?:gems|enterprise)\\.contribsys\\.com',
    flags: 'i',
    keywords: ['contribsys.com'],
  },
  // Keyed rules whose identifier is case-sensitive (`rookTable = 00…` is not Okta).
  ...(
    [
      ['okta-access-token', '[Oo]kta|OKTA', '00[\\w=-]{40}', 4],
      ['etsy-access-token', '[Ee]tsy|ETSY', '[a-zA-Z0-9]{24}', 3],
      ['cisco-meraki-api-key', '[Mm]eraki|MERAKI', '[0-9a-fA-F]{40}', 3],
      ['sumologic-access-id', '[Ss]umo|SUMO', 'su[a-zA-Z0-9]{12}', 3],
      ['sumologic-access-token', '[Ss]umo|SUMO', '[a-zA-Z0-9]{64}', 3],
    ] as const
  ).map(
    ([id, identifiers, value, entropy]): RuleSpec => ({
      id,
      source: keyed(identifiers, value),
      keywords: keywordsOf(identifiers.replace(/\[(\w)\w\]/g, '$1')),
      entropy,
    }),
  ),
  // Keyed provider values (identifier = value)
  ...KEYED.map(
    ([id, identifiers, value, entropy]): RuleSpec => ({
      id,
      source: keyed(identifiers, value),
      flags: 'i',
      keywords: keywordsOf(identifiers),
      ...(entropy === undefined ? {} : { entropy }),
    }),
  ),
  {
    id: 'dropbox-long-lived-api-token',
    source: keyed('dropbox', '[a-z0-9]{11}AAAAAAAAAA[a-z0-9\\-_=]{43}'),
    flags: 'i',
    keywords: ['dropbox'],
    runsOk: true,
  },
  {
    id: 'twitter-bearer-token',
    source: keyed('twitter', 'A{22}[a-zA-Z0-9%]{80,100}'),
    flags: 'i',
    keywords: ['twitter'],
    runsOk: true,
  },
  // Tokens
  {
    id: 'jwt',
    label: 'JSON Web Token',
    source: prefixed('ey[a-zA-Z0-9]{17,}\\.ey[a-zA-Z0-9/\\\\_-]{17,}\\.(?:[a-zA-Z0-9/\\\\_-]{10,}={0,2})?'),
    keywords: ['ey'],
    entropy: 3,
  },
  {
    id: 'jwt-base64',
    label: 'Base64-encoded JSON Web Token',
    source: prefixed('ZXlK[A-Za-z0-9+/]{16,}(?:LmV5S|5leU|uZXlK)[A-Za-z0-9+/]{16,}={0,2}'),
    keywords: ['zxlk'],
    entropy: 2,
  },
  // Keys
  {
    id: 'age-secret-key',
    label: 'age secret key',
    source: 'AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}',
    keywords: ['age-secret-key-1'],
  },
  {
    id: 'private-key',
    label: 'Private key (PEM)',
    // Bounded body so a BEGIN line with no END cannot make the scan quadratic.
    source: String.raw`-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?<secret>[\s\S]{64,16384}?)-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`,
    keywords: ['-----begin'],
  },
  // Anything else assigned to a credential-like name, when it looks random enough.
  {
    id: 'generic-api-key',
    label: 'Generic API key or password',
    source: `(?:access|auth|api|credential|creds|key|passw(?:or)?d|secret|token)${ASSIGN}(?<secret>[\\w.=~+/-]{10,150})${END}`,
    flags: 'i',
    keywords: [
      'access',
      'api',
      'auth',
      'key',
      'credential',
      'creds',
      'passwd',
      'password',
      'secret',
      'token',
    ],
    entropy: 3.5,
    accept: genericAccept,
  },
];

export const SECRET_RULES: readonly SecretRule[] = SPECS.map((spec) => ({
  ...spec,
  label: spec.label ?? labelOf(spec.id),
}));

/** Shannon entropy in bits per character. */
export function shannonEntropy(value: string): number {
  if (value.length === 0) return 0;
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

const PLACEHOLDER_WORDS = [
  'example',
  'sample',
  'dummy',
  'placeholder',
  'changeme',
  'change_me',
  'redacted',
  'your_',
  'your-',
  '_here',
  '-here',
  'xxxx',
  'fake',
  'insert',
  'replace',
  'lorem',
  'foobar',
  'notreal',
  'not_real',
  'donotuse',
];
// Lower-case or upper-case (capitalised too for words of 6+ letters): a random mixed-case body of 90
// characters contains "Fake" about once in 10^5 values, a vendor's documentation never in mixed case.
const PLACEHOLDER_WORD = new RegExp(
  PLACEHOLDER_WORDS.flatMap((w) =>
    w.length >= 6 ? [w, w.toUpperCase(), w.charAt(0).toUpperCase() + w.slice(1)] : [w, w.toUpperCase()],
  ).join('|'),
);
/** Position of a character in the ascending run 0-9a-z (so `0123456789abcdef` is one run), or -1. */
function rank(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 122) return code - 87;
  if (code >= 65 && code <= 90) return code - 55;
  return -1;
}

/** An ascending or descending run of 8+ characters (`abcdefgh`, `12345678`, `9876543210`). */
function hasSequence(value: string): boolean {
  let up = 1;
  let down = 1;
  for (let i = 1; i < value.length; i += 1) {
    const prev = rank(value.charCodeAt(i - 1));
    const cur = rank(value.charCodeAt(i));
    up = prev >= 0 && cur === prev + 1 ? up + 1 : 1;
    down = prev >= 0 && cur >= 0 && cur === prev - 1 ? down + 1 : 1;
    if (up >= 8 || down >= 8) return true;
  }
  return false;
}

/**
 * Documented placeholders and filler: `AKIA…EXAMPLE`, `ghp_xxxx…`, `your-api-key`, a run of one character,
 * an ascending alphabet or digit sequence, or too few distinct characters for a random value.
 */
export function isPlaceholderSecret(value: string, runsOk = false): boolean {
  if (PLACEHOLDER_WORD.test(value)) return true;
  if (hasSequence(value)) return true;
  if (!runsOk && /(.)\1{5,}/.test(value)) return true;
  // Distinct characters of the part after a known prefix (the value's last 16+ characters).
  const tail = value.length > 24 ? value.slice(-Math.max(16, Math.floor(value.length / 2))) : value;
  const distinct = new Set(tail).size;
  if (value.length >= 12 && distinct < Math.min(6, Math.ceil(tail.length / 3))) return true;
  return false;
}

// Rules whose match does not begin at one of their keywords (a left boundary character, a value before the
// distinctive part, an optional scheme): their patterns run over the whole text. Every other rule's patterns
// run only where one of its keywords occurs, as a sticky match at that offset, so the cost of a scan follows
// the number of keyword occurrences rather than rules x text length.
const WHOLE_TEXT_RULES = new Set([
  'azure-ad-client-secret',
  'huggingface-access-token',
  'facebook-access-token',
  'maxmind-license-key',
  'hashicorp-tf-api-token',
  'authress-service-client-access-key',
  'sidekiq-sensitive-url',
  'slack-webhook-url',
  'microsoft-teams-webhook',
  'kubernetes-secret-yaml',
  'freemius-secret-key',
  'telegram-bot-api-token',
  'openai-api-key',
]);

interface CompiledRule {
  rule: SecretRule;
  anchored: boolean;
  /** Global regexes (whole-text scan). */
  regexes: readonly RegExp[];
  /** Sticky regexes (run at keyword offsets). */
  sticky: readonly RegExp[];
}

const COMPILED: readonly CompiledRule[] = SECRET_RULES.map((rule) => {
  const sources = [rule.source, ...(rule.also ?? [])];
  return {
    rule,
    anchored: !WHOLE_TEXT_RULES.has(rule.id),
    regexes: sources.map((s) => new RegExp(s, `gd${rule.flags ?? ''}`)),
    sticky: sources.map((s) => new RegExp(s, `yd${rule.flags ?? ''}`)),
  };
});

function accepted(rule: SecretRule, match: RegExpExecArray, text: string): [number, number] | null {
  const span = match.indices?.groups?.secret ?? match.indices?.[0];
  if (!span || span[1] <= span[0]) return null;
  const value = text.slice(span[0], span[1]);
  if (isPlaceholderSecret(value, rule.runsOk)) return null;
  if (rule.entropy !== undefined && shannonEntropy(value) < rule.entropy) return null;
  if (rule.accept && !rule.accept(value, match, text)) return null;
  return [span[0], span[1]];
}

// Every keyword of every rule (all ASCII), indexed by its first two characters (one-character keywords by
// their only one), so one pass over the text finds all keyword occurrences at once. `PAIR_HIT` marks the
// two-character prefixes that start some keyword, so most offsets cost one typed-array read.
const KEYWORD_INDEX = new Map<number, string[]>();
const PAIR_HIT = new Uint8Array(1 << 16);
const SINGLE_HIT = new Uint8Array(1 << 8);
for (const keyword of new Set(SECRET_RULES.flatMap((r) => r.keywords))) {
  const c0 = keyword.charCodeAt(0);
  const key = keyword.length === 1 ? -c0 - 1 : (c0 << 8) | keyword.charCodeAt(1);
  if (keyword.length === 1) SINGLE_HIT[c0] = 1;
  else PAIR_HIT[key] = 1;
  const list = KEYWORD_INDEX.get(key) ?? [];
  list.push(keyword);
  KEYWORD_INDEX.set(key, list);
}

/** Offsets (ascending) of each keyword present in `lower`. */
function keywordOccurrences(lower: string): Map<string, number[]> {
  const found = new Map<string, number[]>();
  const add = (keyword: string, at: number) => {
    const list = found.get(keyword);
    if (list) list.push(at);
    else found.set(keyword, [at]);
  };
  const n = lower.length;
  let c1 = n > 0 ? lower.charCodeAt(0) : 0;
  for (let i = 0; i < n; i += 1) {
    const c0 = c1;
    c1 = i + 1 < n ? lower.charCodeAt(i + 1) : 0;
    if (c0 > 0xff) continue;
    if (SINGLE_HIT[c0] === 1) for (const keyword of KEYWORD_INDEX.get(-c0 - 1) ?? []) add(keyword, i);
    if (c1 > 0xff) continue;
    const key = (c0 << 8) | c1;
    if (PAIR_HIT[key] !== 1) continue;
    for (const keyword of KEYWORD_INDEX.get(key) ?? []) if (lower.startsWith(keyword, i)) add(keyword, i);
  }
  return found;
}

function offsetsOf(rule: SecretRule, occurrences: Map<string, number[]>): number[] {
  const lists = rule.keywords.map((k) => occurrences.get(k)).filter((l): l is number[] => l !== undefined);
  if (lists.length === 1) return lists[0] as number[];
  const merged = lists.flat().sort((a, b) => a - b);
  return merged.filter((o, i) => i === 0 || o !== merged[i - 1]);
}

function* findings(text: string, stopAtFirstPerRule: boolean): Generator<[SecretRule, [number, number]]> {
  const lower = text.toLowerCase();
  const occurrences = keywordOccurrences(lower);
  // Keyword offsets index `text` only when lower-casing kept every offset (it can lengthen some letters).
  const offsetsValid = lower.length === text.length;
  for (const { rule, anchored, regexes, sticky } of COMPILED) {
    if (!rule.keywords.some((k) => occurrences.has(k))) continue;
    if (anchored && offsetsValid) {
      let end = 0;
      for (const at of offsetsOf(rule, occurrences)) {
        if (at < end) continue; // inside a secret already reported by this rule
        for (const regex of sticky) {
          regex.lastIndex = at;
          const match = regex.exec(text);
          const span = match ? accepted(rule, match, text) : null;
          if (span) {
            yield [rule, span];
            end = span[1];
            break;
          }
        }
        if (end > 0 && stopAtFirstPerRule) break;
      }
      continue;
    }
    let found = false;
    for (const regex of regexes) {
      regex.lastIndex = 0;
      let match: RegExpExecArray | null = regex.exec(text);
      while (match !== null) {
        const span = accepted(rule, match, text);
        if (span) {
          found = true;
          yield [rule, span];
          if (stopAtFirstPerRule) break;
        }
        // Resume right after the match start, so a rejected match does not hide a later one inside it.
        regex.lastIndex = span ? span[1] : match.index + 1;
        match = regex.exec(text);
      }
      if (found && stopAtFirstPerRule) break;
    }
  }
}

/** One entry per rule that matched (in rule order), never the matched text. */
export function scanForSecrets(text: string): SecretMatch[] {
  if (typeof text !== 'string' || text === '') return [];
  const found: SecretMatch[] = [];
  for (const [rule] of findings(text, true)) found.push({ ruleId: rule.id, label: rule.label });
  return found;
}

export const REDACTED = '[REDACTED]';

/** Replaces every match of every rule (its `secret` group when it has one) with `[REDACTED]`. */
export function redactSecrets(text: string): string {
  if (typeof text !== 'string' || text === '') return text;
  const ranges: Array<[number, number]> = [];
  for (const [, span] of findings(text, false)) ranges.push(span);
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = '';
  let cursor = 0;
  for (const [start, end] of ranges) {
    if (end <= cursor) continue;
    if (start >= cursor) out += text.slice(cursor, start) + REDACTED;
    cursor = end;
  }
  return out + text.slice(cursor);
}
