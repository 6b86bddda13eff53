// A labelled corpus for the secret scanner, built at run time so no string in this repository looks like a
// real credential. One entry per gitleaks rule id (the public rule set the scanner covers): the value's format
// as gitleaks' rule and true-positive samples describe it, and, for keyed rules, the provider identifier that
// must stand on the left of the assignment. True positives embed a random value of that format in several
// file syntaxes; false positives are the same formats filled with documented placeholders (a run of one
// character, `…EXAMPLE`, an ascending sequence), `your-…-key` / `<token>` / `${VAR}` values next to the same
// identifiers, and ordinary memory notes that talk about credentials without containing one. Deterministic:
// the same seed gives the same corpus. Used by the scanner's tests and bench/secrets.ts.

export interface SecretSample {
  /** The gitleaks rule id the sample is modelled on. */
  ruleId: string;
  family: string;
  kind: 'tp' | 'fp';
  /** How the value is embedded (or which placeholder it is). */
  shape: string;
  text: string;
}

type Part = string | { alphabet: string; min: number; max: number };

const LO = 'abcdefghijklmnopqrstuvwxyz';
const UP = LO.toUpperCase();
const DG = '0123456789';
const AN = LO + UP + DG;
const LDG = LO + DG;
const UDG = UP + DG;
const HEX = '0123456789abcdef';
const HEXU = '0123456789ABCDEF';
const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const B64 = `${AN}+/`;
const ANX = `${AN}_-`;
const W = `${AN}_`;
const BECH32 = 'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L';

const r = (alphabet: string, min: number, max = min): Part => ({ alphabet, min, max });
const uuid = (hex = HEX): Part[] => [
  r(hex, 8),
  '-',
  r(hex, 4),
  '-',
  r(hex, 4),
  '-',
  r(hex, 4),
  '-',
  r(hex, 12),
];

interface Spec {
  id: string;
  parts: Part[];
  /** Keyed rules: the provider identifier written on the left of the assignment. */
  key?: string;
  /** Custom embedding (for rules that recognise a whole construct, not a value). */
  embed?: (value: string) => string[];
  /** Placeholder fills that do not fit the format (e.g. digits-only values have no EXAMPLE form). */
  noExample?: boolean;
}

const k = (id: string, key: string, ...parts: Part[]): Spec => ({ id, key, parts });
const p = (id: string, ...parts: Part[]): Spec => ({ id, parts });

const ANTHROPIC = ['sk', 'ant', 'api03'].join('-');
const ANTHROPIC_ADMIN = ['sk', 'ant', 'admin01'].join('-');

export const CORPUS_SPECS: readonly Spec[] = [
  p(
    '1password-secret-key',
    'A3-',
    r(UDG, 6),
    '-',
    r(UDG, 11),
    '-',
    r(UDG, 5),
    '-',
    r(UDG, 5),
    '-',
    r(UDG, 5),
  ),
  p('1password-service-account-token', 'ops_eyJ', r(B64, 260)),
  k('adafruit-api-key', 'adafruit', r(`${LDG}_-`, 32)),
  k('adobe-client-id', 'adobe', r(HEX, 32)),
  p('adobe-client-secret', 'p8e-', r(AN, 32)),
  p('age-secret-key', 'AGE-SECRET-KEY-1', r(BECH32, 58)),
  k('airtable-api-key', 'airtable', r(LDG, 17)),
  p('airtable-personnal-access-token', 'pat', r(AN, 14), '.', r(HEX, 64)),
  k('algolia-api-key', 'algolia', r(LDG, 32)),
  p('alibaba-access-key-id', 'LTAI', r(LDG, 20)),
  k('alibaba-secret-key', 'alibaba', r(LDG, 30)),
  p('anthropic-admin-api-key', `${ANTHROPIC_ADMIN}-`, r(ANX, 93), 'AA'),
  p('anthropic-api-key', `${ANTHROPIC}-`, r(ANX, 93), 'AA'),
  p('artifactory-api-key', 'AKCp', r(AN, 69)),
  p('artifactory-reference-token', 'cmVmd', r(AN, 59)),
  k('asana-client-id', 'asana', r(DG, 16)),
  k('asana-client-secret', 'asana', r(LDG, 32)),
  k('atlassian-api-token', 'atlassian', r(LDG, 20), r(HEX, 4)),
  p(
    'authress-service-client-access-key',
    'sc_',
    r(LDG, 12),
    '.',
    r(LDG, 5),
    '.acc_',
    r(LDG, 20),
    '.',
    r(`${LDG}+/_`, 40),
  ),
  p('aws-access-token', 'AKIA', r(B32, 16)),
  p('aws-amazon-bedrock-api-key-long-lived', 'ABSK', r(B64, 132)),
  p('aws-amazon-bedrock-api-key-short-lived', 'bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t', r(B64, 120)),
  p('azure-ad-client-secret', r(AN, 3), r(DG, 1), 'Q~', r(`${AN}_~.-`, 32)),
  k('beamer-api-token', 'beamer', 'b_', r(`${LDG}=_-`, 44)),
  k('bitbucket-client-id', 'bitbucket', r(LDG, 32)),
  k('bitbucket-client-secret', 'bitbucket', r(`${LDG}=_-`, 64)),
  k('bittrex-access-key', 'bittrex', r(LDG, 32)),
  k('bittrex-secret-key', 'bittrex', r(LDG, 32)),
  k('cisco-meraki-api-key', 'meraki', r(HEX, 40)),
  p('clickhouse-cloud-api-secret-key', '4b1d', r(AN, 38)),
  p('clojars-api-token', 'CLOJARS_', r(LDG, 60)),
  k('cloudflare-api-key', 'cloudflare', r(`${LDG}_-`, 40)),
  k('cloudflare-global-api-key', 'cloudflare', r(HEX, 37)),
  p('cloudflare-origin-ca-key', 'v1.0-', r(HEX, 24), '-', r(HEX, 146)),
  k('codecov-access-token', 'codecov', r(LDG, 32)),
  k('cohere-api-token', 'cohere', r(AN, 40)),
  k('coinbase-access-token', 'coinbase', r(`${LDG}_-`, 64)),
  k('confluent-access-token', 'confluent', r(LDG, 16)),
  k('confluent-secret-key', 'confluent', r(LDG, 64)),
  k('contentful-delivery-api-token', 'contentful', r(`${LDG}=_-`, 43)),
  {
    id: 'curl-auth-header',
    parts: [r(AN, 40)],
    embed: (v) => [
      `curl -X POST https://api.internal.test/v1/jobs -H "Authorization: Bearer ${v}"`,
      `curl --header "X-Api-Key: ${v}" https://metrics.internal.test/query`,
    ],
  },
  {
    id: 'curl-auth-user',
    parts: [r(LDG, 8), ':', r(AN, 20)],
    embed: (v) => [
      `curl -u ${v} https://registry.internal.test/v2/_catalog`,
      `curl --user "${v}" https://ci.internal.test/api`,
    ],
  },
  p('databricks-api-token', 'dapi', r(HEX, 32)),
  k('datadog-access-token', 'datadog', r(LDG, 40)),
  k('defined-networking-api-token', 'dnkey', 'dnkey-', r(`${LDG}_-`, 26), '-', r(`${LDG}_-`, 52)),
  p('digitalocean-access-token', 'doo_v1_', r(HEX, 64)),
  p('digitalocean-pat', 'dop_v1_', r(HEX, 64)),
  p('digitalocean-refresh-token', 'dor_v1_', r(HEX, 64)),
  k('discord-api-token', 'discord', r(HEX, 64)),
  k('discord-client-id', 'discord', r(DG, 18)),
  k('discord-client-secret', 'discord', r(`${LDG}=_-`, 32)),
  p('doppler-api-token', 'dp.pt.', r(AN, 43)),
  k('droneci-access-token', 'droneci', r(LDG, 32)),
  k('dropbox-api-token', 'dropbox', r(LDG, 15)),
  k('dropbox-long-lived-api-token', 'dropbox', r(LDG, 11), 'AAAAAAAAAA', r(`${LDG}-_=`, 43)),
  k('dropbox-short-lived-api-token', 'dropbox', 'sl.', r(`${LDG}-=_`, 135)),
  p('duffel-api-token', 'duffel_live_', r(`${AN}_-=`, 43)),
  p('dynatrace-api-token', 'dt0c01.', r(AN, 24), '.', r(AN, 64)),
  p('easypost-api-token', 'EZAK', r(AN, 54)),
  p('easypost-test-api-token', 'EZTK', r(AN, 54)),
  k('etsy-access-token', 'etsy', r(LDG, 24)),
  p('facebook-access-token', r(DG, 15), '|', r(`${AN}_-`, 32)),
  p('facebook-page-access-token', 'EAAM', r(AN, 120)),
  k('facebook-secret', 'facebook', r(HEX, 32)),
  k('fastly-api-token', 'fastly', r(`${LDG}=_-`, 32)),
  k('finicity-api-token', 'finicity', r(HEX, 32)),
  k('finicity-client-secret', 'finicity', r(LDG, 20)),
  k('finnhub-access-token', 'finnhub', r(LDG, 20)),
  k('flickr-access-token', 'flickr', r(LDG, 32)),
  p('flutterwave-encryption-key', 'FLWSECK_TEST-', r('abcdefgh0123456789', 12)),
  p('flutterwave-public-key', 'FLWPUBK_TEST-', r('abcdefgh0123456789', 32), '-X'),
  p('flutterwave-secret-key', 'FLWSECK_TEST-', r('abcdefgh0123456789', 32), '-X'),
  p('flyio-access-token', 'fm2_', r(B64, 120)),
  p('frameio-api-token', 'fio-u-', r(`${AN}-_=`, 64)),
  {
    id: 'freemius-secret-key',
    parts: ['sk_', r(AN, 29)],
    embed: (v) => [`$config = array(\n  'id' => '1234',\n  'secret_key' => '${v}',\n);`],
  },
  k('freshbooks-access-token', 'freshbooks', r(LDG, 64)),
  p('gcp-api-key', 'AIza', r(`${AN}_-`, 35)),
  {
    id: 'generic-api-key',
    parts: [r(AN, 12), r(DG, 4), r(AN, 16)],
    embed: (v) => [
      `client_secret = "${v}"`,
      `DB_PASSWORD=${v}`,
      `"auth_token": "${v}"`,
      `apiKey: '${v}'`,
      `credentials := "${v}"`,
    ],
  },
  p('github-app-token', 'ghs_', r(AN, 36)),
  p('github-fine-grained-pat', 'github_pat_', r(W, 82)),
  p('github-oauth', 'gho_', r(AN, 36)),
  p('github-pat', 'ghp_', r(AN, 36)),
  p('github-refresh-token', 'ghr_', r(AN, 36)),
  p('gitlab-cicd-job-token', 'glcbt-', r(AN, 3), '_', r(ANX, 20)),
  p('gitlab-deploy-token', 'gldt-', r(ANX, 20)),
  p('gitlab-feature-flag-client-token', 'glffct-', r(ANX, 20)),
  p('gitlab-feed-token', 'glft-', r(ANX, 20)),
  p('gitlab-incoming-mail-token', 'glimt-', r(ANX, 25)),
  p('gitlab-kubernetes-agent-token', 'glagent-', r(ANX, 50)),
  p('gitlab-oauth-app-secret', 'gloas-', r(ANX, 64)),
  p('gitlab-pat', 'glpat-', r(ANX, 20)),
  p('gitlab-pat-routable', 'glpat-', r(ANX, 40), '.', r(LDG, 2), r(LDG, 7)),
  p('gitlab-ptt', 'glptt-', r(HEX, 40)),
  p('gitlab-rrt', 'GR1348941', r(ANX, 20)),
  p('gitlab-runner-authentication-token', 'glrt-', r(ANX, 20)),
  p('gitlab-runner-authentication-token-routable', 'glrt-t', r(DG, 1), '_', r(ANX, 40), '.', r(LDG, 9)),
  p('gitlab-scim-token', 'glsoat-', r(ANX, 20)),
  {
    id: 'gitlab-session-cookie',
    parts: [r(LDG, 32)],
    embed: (v) => [`Cookie: _gitlab_session=${v}; path=/`],
  },
  k('gitter-access-token', 'gitter', r(`${LDG}_-`, 40)),
  k('gocardless-api-token', 'gocardless', 'live_', r(`${LDG}-_=`, 40)),
  p('grafana-api-key', 'eyJrIjoi', r(AN, 80)),
  p('grafana-cloud-api-token', 'glc_', r(B64, 60)),
  p('grafana-service-account-token', 'glsa_', r(AN, 32), '_', r(HEX, 8)),
  p('harness-api-key', 'pat.', r(ANX, 22), '.', r(AN, 24), '.', r(AN, 20)),
  p('hashicorp-tf-api-token', r(AN, 14), '.atlasv1.', r(`${AN}-_=`, 65)),
  {
    id: 'hashicorp-tf-password',
    parts: [r(LDG, 12), r(DG, 2)],
    embed: (v) => [`resource "azurerm_sql_server" "db" {\n  administrator_login_password = "${v}"\n}`],
  },
  k('heroku-api-key', 'heroku', ...uuid()),
  p('heroku-api-key-v2', 'HRKU-AA', r(ANX, 58)),
  k('hubspot-api-key', 'hubspot', ...uuid(HEXU)),
  p('huggingface-access-token', 'hf_', r(LO + UP, 34)),
  p('huggingface-organization-api-token', 'api_org_', r(LO + UP, 34)),
  p('infracost-api-token', 'ico-', r(AN, 32)),
  k('intercom-api-key', 'intercom', r(`${LDG}=_-`, 60)),
  p('intra42-client-secret', 's-s4t2ud-', r(HEX, 64)),
  k('jfrog-api-key', 'jfrog', r(LDG, 73)),
  k('jfrog-identity-token', 'artifactory', r(LDG, 64)),
  {
    id: 'jwt',
    parts: ['eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ', r(AN, 60), '.', r(`${AN}_-`, 43)],
  },
  {
    id: 'jwt-base64',
    parts: ['ZXlKaGJHY2lPaUpJVXpJMU5pSXNJblI1Y0NJNklrcFhWQ0o5LmV5S', r(B64, 80)],
  },
  k('kraken-access-token', 'kraken', r(`${LDG}/=_+-`, 86)),
  {
    id: 'kubernetes-secret-yaml',
    parts: [r(B64, 40), '=='],
    embed: (v) => [
      `apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\ntype: Opaque\ndata:\n  password: ${v}\n`,
    ],
  },
  k('kucoin-access-token', 'kucoin', r(HEX, 24)),
  k('kucoin-secret-key', 'kucoin', ...uuid()),
  k('launchdarkly-access-token', 'launchdarkly', r(`${LDG}=_-`, 40)),
  p('linear-api-key', 'lin_api_', r(AN, 40)),
  k('linear-client-secret', 'linear', r(HEX, 32)),
  k('linkedin-client-id', 'linkedin', r(LDG, 14)),
  k('linkedin-client-secret', 'linkedin', r(LDG, 16)),
  k('lob-api-key', 'lob', 'live_', r(HEX, 35)),
  k('lob-pub-api-key', 'lob', 'test_pub_', r(HEX, 31)),
  k('looker-client-id', 'looker', r(LDG, 20)),
  k('looker-client-secret', 'looker', r(LDG, 24)),
  k('mailchimp-api-key', 'mailchimp', r(HEX, 32), '-us', r(DG, 2)),
  k('mailgun-private-api-token', 'mailgun', 'key-', r(HEX, 32)),
  k('mailgun-pub-key', 'mailgun', 'pubkey-', r(HEX, 32)),
  k(
    'mailgun-signing-key',
    'mailgun',
    r('abcdefgh0123456789', 32),
    '-',
    r('abcdefgh0123456789', 8),
    '-',
    r('abcdefgh0123456789', 8),
  ),
  k('mapbox-api-token', 'mapbox', 'pk.', r(LDG, 60), '.', r(LDG, 22)),
  k('mattermost-access-token', 'mattermost', r(LDG, 26)),
  p('maxmind-license-key', r(AN, 6), '_', r(AN, 29), '_mmk'),
  k('messagebird-api-token', 'messagebird', r(LDG, 25)),
  k('messagebird-client-id', 'message_bird', ...uuid()),
  {
    id: 'microsoft-teams-webhook',
    parts: [
      'https://contoso.webhook.office.com/webhookb2/',
      ...uuid(),
      '@',
      ...uuid(),
      '/IncomingWebhook/',
      r(LDG, 32),
      '/',
      ...uuid(),
    ],
  },
  k('netlify-access-token', 'netlify', r(`${LDG}=_-`, 43)),
  p('new-relic-browser-api-token', 'NRJS-', r(HEX, 19)),
  p('new-relic-insert-key', 'NRII-', r(`${LDG}-`, 32)),
  k('new-relic-user-api-id', 'newrelic', r(LDG, 64)),
  p('new-relic-user-api-key', 'NRAK-', r(UDG, 27)),
  p('notion-api-token', 'ntn_', r(DG, 11), r(AN, 35)),
  p('npm-access-token', 'npm_', r(AN, 36)),
  {
    id: 'nuget-config-password',
    parts: [r(AN, 16), r(DG, 2)],
    embed: (v) => [
      `<packageSourceCredentials>\n  <feed>\n    <add key="ClearTextPassword" value="${v}" />\n  </feed>\n</packageSourceCredentials>`,
    ],
  },
  k('nytimes-access-token', 'nytimes', r(`${LDG}=_-`, 32)),
  p('octopus-deploy-api-key', 'API-', r(UDG, 26)),
  k('okta-access-token', 'okta', '00', r(`${AN}_=-`, 40)),
  p('openai-api-key', 'sk-proj-', r(ANX, 74), 'T3BlbkFJ', r(ANX, 74)),
  p('openshift-user-token', 'sha256~', r(ANX, 43)),
  p('perplexity-api-key', 'pplx-', r(AN, 48)),
  k('plaid-api-token', 'plaid', 'access-sandbox-', ...uuid()),
  k('plaid-client-id', 'plaid', r(LDG, 24)),
  k('plaid-secret-key', 'plaid', r(LDG, 30)),
  p('planetscale-api-token', 'pscale_tkn_', r(`${AN}_=.-`, 43)),
  p('planetscale-oauth-token', 'pscale_oauth_', r(`${AN}_=.-`, 43)),
  p('planetscale-password', 'pscale_pw_', r(`${AN}_=.-`, 43)),
  p('postman-api-token', 'PMAK-', r(HEX, 24), '-', r(HEX, 34)),
  p('prefect-api-token', 'pnu_', r(AN, 36)),
  {
    id: 'private-key',
    parts: [r(B64, 64), '\n', r(B64, 64), '\n', r(B64, 64), '\n', r(B64, 40)],
    embed: (v) => [
      `-----BEGIN RSA PRIVATE KEY-----\n${v}\n-----END RSA PRIVATE KEY-----`,
      `-----BEGIN OPENSSH PRIVATE KEY-----\n${v}\n-----END OPENSSH PRIVATE KEY-----`,
    ],
  },
  k('privateai-api-token', 'private_ai', r(LDG, 32)),
  p('pulumi-api-token', 'pul-', r(HEX, 40)),
  p('pypi-upload-token', 'pypi-AgEIcHlwaS5vcmc', r(`${W}-`, 70)),
  k('rapidapi-access-token', 'rapidapi', r(`${LDG}_-`, 50)),
  p('readme-api-token', 'rdme_', r(LDG, 70)),
  p('rubygems-api-token', 'rubygems_', r(HEX, 48)),
  p('scalingo-api-token', 'tk-us-', r(`${W}-`, 48)),
  k('sendbird-access-id', 'sendbird', ...uuid()),
  k('sendbird-access-token', 'sendbird', r(HEX, 40)),
  p('sendgrid-api-token', 'SG.', r(`${AN}_-`, 22), '.', r(`${AN}_-`, 43)),
  p('sendinblue-api-token', 'xkeysib-', r(HEX, 64), '-', r(AN, 16)),
  k('sentry-access-token', 'sentry', r(HEX, 64)),
  p('sentry-org-token', 'sntrys_eyJpYXQiO', r(AN, 24), 'LCJyZWdpb25fdXJs', r(AN, 40), '_', r(AN, 43)),
  p('sentry-user-token', 'sntryu_', r(HEX, 64)),
  p('settlemint-application-access-token', 'sm_aat_', r(AN, 16)),
  p('settlemint-personal-access-token', 'sm_pat_', r(AN, 16)),
  p('settlemint-service-access-token', 'sm_sat_', r(AN, 16)),
  p('shippo-api-token', 'shippo_live_', r(HEX, 40)),
  p('shopify-access-token', 'shpat_', r(HEX, 32)),
  p('shopify-custom-access-token', 'shpca_', r(HEX, 32)),
  p('shopify-private-app-access-token', 'shppa_', r(HEX, 32)),
  p('shopify-shared-secret', 'shpss_', r(HEX, 32)),
  k('sidekiq-secret', 'BUNDLE_ENTERPRISE__CONTRIBSYS__COM', r(HEX, 8), ':', r(HEX, 8)),
  {
    id: 'sidekiq-sensitive-url',
    parts: [r(HEX, 8), ':', r(HEX, 8)],
    embed: (v) => [`source "https://${v}@enterprise.contribsys.com/"`],
  },
  p('slack-app-token', 'xapp-1-A', r(UDG, 10), '-', r(DG, 13), '-', r(LDG, 64)),
  p('slack-bot-token', 'xoxb-', r(DG, 12), '-', r(DG, 13), '-', r(AN, 24)),
  p('slack-config-access-token', 'xoxe.xoxp-1-', r(UDG, 164)),
  p('slack-config-refresh-token', 'xoxe-1-', r(UDG, 146)),
  p('slack-legacy-bot-token', 'xoxb-', r(DG, 10), '-', r(AN, 24)),
  p('slack-legacy-token', 'xoxs-', r(DG, 10), '-', r(DG, 10), '-', r(DG, 12), '-', r(HEX, 64)),
  p('slack-legacy-workspace-token', 'xoxa-2-', r(AN, 36)),
  p('slack-user-token', 'xoxp-', r(DG, 11), '-', r(DG, 11), '-', r(DG, 12), '-', r(AN, 32)),
  p('slack-webhook-url', 'https://hooks.slack.com/services/', r(UDG, 11), '/', r(UDG, 11), '/', r(AN, 24)),
  k('snyk-api-token', 'snyk_token', ...uuid()),
  k('sonar-api-token', 'sonar_token', 'squ_', r(LDG, 40)),
  p('sourcegraph-access-token', 'sgp_', r(HEX, 16), '_', r(HEX, 40)),
  p('square-access-token', 'sq0atp-', r(`${W}-`, 22)),
  k('squarespace-access-token', 'squarespace', ...uuid()),
  p('stripe-access-token', 'sk_live_', r(AN, 24)),
  k('sumologic-access-id', 'SUMO', 'su', r(AN, 12)),
  k('sumologic-access-token', 'sumo', r(LDG, 64)),
  k('telegram-bot-api-token', 'telegram', r(DG, 9), ':AA', r(`${AN}_-`, 33)),
  k('travisci-access-token', 'travis', r(LDG, 22)),
  p('twilio-api-key', 'SK', r(HEX, 32)),
  k('twitch-api-token', 'twitch', r(LDG, 30)),
  k('twitter-access-secret', 'twitter', r(LDG, 45)),
  k('twitter-access-token', 'twitter', r(DG, 19), '-', r(AN, 30)),
  k('twitter-api-key', 'twitter', r(LDG, 25)),
  k('twitter-api-secret', 'twitter', r(LDG, 50)),
  k('twitter-bearer-token', 'twitter', 'AAAAAAAAAAAAAAAAAAAAAA', r(`${AN}%`, 90)),
  k('typeform-api-token', 'typeform', 'tfp_', r(`${LDG}-_.=`, 59)),
  p('vault-batch-token', 'hvb.', r(ANX, 150)),
  p('vault-service-token', 'hvs.', r(ANX, 95)),
  k('yandex-access-token', 'yandex', 't1.', r(ANX, 40), '.', r(ANX, 86)),
  k('yandex-api-key', 'yandex', 'AQVN', r(ANX, 36)),
  k('yandex-aws-access-token', 'yandex', 'YC', r(ANX, 38)),
  k('zendesk-secret-key', 'zendesk', r(LDG, 40)),
];

/** gitleaks rule ids with no text sample here, and why. */
export const CORPUS_EXCLUDED: Readonly<Record<string, string>> = {
  'pkcs12-file': 'a path rule for binary .p12/.pfx files; memory files are Markdown text',
};

const FAMILY_ALIASES: Record<string, string> = {
  new: 'new-relic',
  cisco: 'meraki',
  '1password': '1password',
};
export function familyOf(ruleId: string): string {
  const head = ruleId.split('-')[0] as string;
  return FAMILY_ALIASES[head] ?? head;
}

/** A seeded pseudo-random source in [0, 1) (mulberry32): the same seed gives the same corpus on every run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Fill = 'random' | 'repeat' | 'sequence' | 'example';

/** The alphabet starts with an ascending run of 8 (so a sequence fill is a documented-looking filler). */
function isOrdered(alphabet: string): boolean {
  for (let i = 1; i < 8; i += 1) if (alphabet.charCodeAt(i) !== alphabet.charCodeAt(i - 1) + 1) return false;
  return true;
}

function render(parts: readonly Part[], fill: Fill, next: () => number): string | null {
  const pieces: string[] = [];
  let longest = -1;
  for (const part of parts) {
    if (typeof part === 'string') {
      pieces.push(part);
      continue;
    }
    const n = part.min + Math.floor(next() * (part.max - part.min + 1));
    let s = '';
    if (fill === 'repeat') {
      const ch = part.alphabet.includes('x')
        ? 'x'
        : part.alphabet.includes('X')
          ? 'X'
          : (part.alphabet[0] as string);
      s = ch.repeat(n);
    } else if (fill === 'sequence') {
      if (!isOrdered(part.alphabet)) return null;
      // Ascending from the alphabet's start (every alphabet here begins with an ordered run), cycled.
      for (let i = 0; i < n; i += 1) s += part.alphabet[i % Math.min(part.alphabet.length, 26)];
    } else {
      for (let i = 0; i < n; i += 1) s += part.alphabet[Math.floor(next() * part.alphabet.length)];
    }
    const best = longest < 0 ? -1 : (pieces[longest] as string).length;
    if (n > best) longest = pieces.length;
    pieces.push(s);
  }
  if (fill === 'example') {
    // The longest random part ends in EXAMPLE, as vendors' documentation keys do.
    const part = parts[longest];
    if (longest < 0 || typeof part !== 'object') return null;
    const word =
      /[EX]/.test(part.alphabet) && part.alphabet.includes('E') && part.alphabet.includes('X')
        ? 'EXAMPLE'
        : part.alphabet.includes('e') && part.alphabet.includes('x')
          ? 'example'
          : null;
    const piece = pieces[longest] as string;
    if (!word || piece.length < 12) return null;
    pieces[longest] = piece.slice(0, piece.length - word.length) + word;
  }
  return pieces.join('');
}

const TP_PREFIXED: ReadonlyArray<readonly [string, (s: string) => string]> = [
  ['prose', (s) => `Deploy notes: the credential is ${s}\nkeep it safe.`],
  ['env', (s) => `export DEPLOY_CREDENTIAL=${s}`],
  ['json', (s) => `{\n  "credential": "${s}"\n}`],
  ['yaml', (s) => `ci:\n  credential: '${s}'`],
  ['markdown-code', (s) => `- Rotated on Monday; the new one is \`${s}\`.`],
  ['url', (s) => `git remote set-url origin https://oauth2:${s}@git.internal.test/team/app.git`],
  ['table', (s) => `| env | credential |\n| --- | --- |\n| prod | ${s} |`],
];

const TP_KEYED: ReadonlyArray<readonly [string, (i: string, s: string) => string]> = [
  ['ini', (i, s) => `${i}_api_token = "${s}"`],
  ['env', (i, s) => `${i.toUpperCase()}_TOKEN=${s}`],
  ['yaml', (i, s) => `${i}_token: '${s}'`],
  ['json', (i, s) => `{\n    "${i}_key": "${s}"\n}`],
  ['go', (i, s) => `${i}Token := "${s}"`],
  ['java', (i, s) => `System.setProperty("${i.toUpperCase()}_SECRET", "${s}")`],
  ['xml', (i, s) => `<${i}Token>\n    ${s}\n</${i}Token>`],
  ['make', (i, s) => `${i.toUpperCase()}_TOKEN ?= "${s}"`],
];

/** Ordinary memory-file text that mentions credentials, providers and ids without containing a secret. */
export const BENIGN_NOTES: readonly string[] = [
  'The API key lives in 1Password under "Prod / Stripe"; never paste it here.',
  'Use `sk_test_` keys only in CI (prefix alone, no key).',
  'AKIA is the prefix of AWS access key ids; the docs example is AKIAIOSFODNN7EXAMPLE.',
  'token_limit: 4096',
  'api_version: 2024-06-01',
  'The auth flow is oauth2-pkce-flow; see docs/auth.md.',
  'password: see the team vault entry "db-prod"',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${VAR} placeholder, not a template
  'DATADOG_API_KEY=${DATADOG_API_KEY}',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${VAR} placeholder, not a template
  'GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}',
  'STRIPE_SECRET_KEY=your-stripe-secret-key',
  'SLACK_BOT_TOKEN=<token>',
  'export OPENAI_API_KEY=<your-openai-key>',
  'heroku_api_key: "{{ heroku_api_key }}"',
  'Set `TWILIO_AUTH_TOKEN` in the environment, not in code.',
  'The Okta tenant is dev-123456.okta.com; client id lives in the admin console.',
  'commit 3f2a9c81d4b7e6f0a1c2d3e4f5a6b7c8d9e0f1a2 fixed the datadog exporter',
  'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
  'integrity: sha512-Q0mX0bYk0vlx3O1Bb6N8yB0aXh8cHqgq3f0P6D8QpK1m0Zc1Rm7bWw9sFJ3qYw==',
  'request_id: 5f0c6e0e-6b0b-4f6e-9a1e-3c0b9a8f7d6e was the failing call',
  'public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host',
  'key_id: 7f3c2a1b9e8d',
  'primary_key = order_id, line_no',
  'The vault token TTL is 768h; renew with `vault token renew`.',
  'Vault tokens look like hvs.<random>; ours are issued by the CI role.',
  'secret_name: prod/db/credentials',
  'access_level: maintainer',
  'api_url: https://api.internal.test/v2',
  'token_url = https://auth.internal.test/oauth/token',
  'Ticket ENG-4821 tracks the key rotation.',
  'key: value',
  'The feature flag checkout_v2 is at 7% rollout.',
  'Slack webhook for alerts: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX',
  'GitLab runner tokens start with glrt-; register runners through the UI.',
  'ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is the placeholder in our README.',
  'export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  'Authorization: Bearer $TOKEN',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${VAR} placeholder, not a template
  'curl -H "Authorization: Bearer ${API_TOKEN}" https://api.internal.test/v1/me',
  'curl -u user:password https://example.test/',
  'password = "changeme"',
  'JWT tokens expire after 15 minutes; refresh tokens after 30 days.',
  'Keyboard shortcut: press the `key` binding Ctrl+K to open search.',
  'The monkey = patch_runtime_2024 hack is gone.',
  'author: Jane Doe <jane@example.test>',
  'The Sentry DSN is public by design; the auth token is in CI settings.',
  'Mailchimp list id: a1b2c3d4e5',
  'sk_live keys are only used by the payments service.',
  'The private key is stored in AWS KMS (alias/engram-signing); never export it.',
  '-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END PUBLIC KEY-----',
  'Redis password: stored in the k8s secret redis-auth (key: password).',
  'cache_key = f"user:{user_id}:profile"',
  'api_key_header: X-Api-Key',
  'The "credentials" file is ~/.aws/credentials; it is not in the repo.',
  'Build 2024.11.03-rc1 shipped; auth_version = 3.2.1-beta',
  'Use `engram doctor` to check the token budget: token_budget=12000',
  'Access token lifetime: access_token_ttl = 3600',
  'The Twilio account is "engram-alerts"; SID and auth token are in the vault.',
  'npm_config_registry is set by CI; npm tokens are never stored here.',
  'Use pk_test_ keys in the storybook; they are publishable.',
  'kind: Secret objects are created by the sealed-secrets controller, never by hand.',
  'AIzaSy… keys for Maps are restricted by referrer.',
];

/**
 * Near misses in the style of gitleaks' false-positive samples (wrong case, wrong prefix, too short, low
 * entropy, identifiers that only contain a keyword), written for this corpus; `R` inserts a random value.
 */
function nearMisses(R: (alphabet: string, n: number) => string): Array<[string, string]> {
  return [
    ['okta-access-token', `rookTable = 00${R(AN, 40)}`],
    ['okta-access-token', `oktaKey = 00000000000000000000000000000000000TUVWXYZ`],
    ['vault-service-token', 's.makeKubeConfigController = args'],
    ['vault-service-token', 's.AcceptanceTimeoutSeconds '],
    ['vault-service-token', 's.THISSTRINGISALLUPPERCASE'],
    ['vault-service-token', `hvs.${'x'.repeat(95)}`],
    ['slack-bot-token', 'xoxb-xxxxxxxxx-xxxxxxxxxx-xxxxxxxxxxxx'],
    ['slack-bot-token', 'xoxb-12345-abcd234'],
    ['slack-bot-token', 'xoxb-xoxb-my-bot-token'],
    ['slack-config-access-token', 'xoxe.xoxp-1-SlackAppConfigurationAccessTokenHere'],
    [
      'slack-user-token',
      '"token2": "xoxp-XXXXXXXXXX-XXXXXXXXXX-XXXXXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"',
    ],
    ['aws-access-token', 'key = AKIAXXXXXXXXXXXXXXXX'],
    ['aws-access-token', 'aws_access_key: AKIAIOSFODNN7EXAMPLE'],
    ['aws-access-token', 'TODAYINASIAASACKOFRICEFELLOVERTHEWALL'],
    ['aws-amazon-bedrock-api-key-long-lived', 'ABSKQmVkcm9ja0FQSUtleS1EXAMPLE'],
    ['aws-amazon-bedrock-api-key-short-lived', 'bedrock-api-key-'],
    ['gitlab-pat', 'glpat-XXXXXXXXXXX-XXXXXXXX'],
    ['gitlab-pat-routable', 'glpat-xxxxxxxx-xxxxxxxxxxxxxxxxxx.xxxxxxxxx'],
    ['gitlab-rrt', 'GR134894112312312312312312312'],
    ['gitlab-rrt', 'GR1348941XXXXXXXXXXXXXXXXXXXX'],
    ['github-pat', `ghp_${'x'.repeat(36)}`],
    ['github-pat', 'ghp_0000000000000000000000000000000000000'],
    ['github-pat', `const prefix = 'ghp_'; // classic PATs`],
    ['stripe-access-token', `sk_test_${'4eC39HqLyjWDarjtT1zdp7dc'.replace(/./g, 'x')}`],
    ['twilio-api-key', `SK${'0'.repeat(32)}`],
    ['jwt', 'eyJhbGciOiJIUzI1NiJ9 is the header of every HS256 token we issue'],
    ['private-key', '-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----'],
    ['private-key', '-----BEGIN PRIVATE KEY-----\n<paste the key here>\n-----END PRIVATE KEY-----'],
    ['generic-api-key', `"accessor":"${R(AN, 16)}",`],
    [
      'generic-api-key',
      `report_access_id: ${R(HEX, 8)}-${R(HEX, 4)}-4${R(HEX, 3)}-a${R(HEX, 3)}-${R(HEX, 12)}`,
    ],
    ['generic-api-key', `credentialsId: '${R(HEX, 8)}-${R(HEX, 4)}-${R(HEX, 4)}-${R(HEX, 4)}-${R(HEX, 12)}'`],
    ['generic-api-key', `MantleAPI_version=${R(HEX, 40)}`],
    ['generic-api-key', 'apiUrl=apigee.corp.internal.test'],
    ['generic-api-key', 'X-API-Name": "NRG0-Hermes-INTERNAL-API",'],
    ['generic-api-key', 'author = "jane.doe@mail.internal.test",'],
    ['generic-api-key', 'COMMUNICATION_API_VERSION=rc0.13.0_20230412_0712-SNAPSHOT'],
    ['generic-api-key', 'keyboardLayout = dvorak-intl-2'],
    ['generic-api-key', 'token_expiry: 2026-12-01T10:00:00Z'],
    ['generic-api-key', 'secret_ref: projects/app/secrets/db-password/versions/latest'],
    ['generic-api-key', 'password_policy = min12-upper1-digit1'],
    ['generic-api-key', 'api_base = /v2/internal'],
    ['generic-api-key', 'AUTH_PROVIDER=keycloak-17.0.1'],
    ['heroku-api-key', 'heroku_app_name: engram-staging-eu'],
    ['datadog-access-token', 'datadog_site: datadoghq.eu'],
    ['atlassian-api-token', 'jira_project = ENG, jira_board = 42'],
    ['mailgun-private-api-token', 'mailgun_domain = mg.internal.test'],
  ];
}

/** The whole corpus, deterministic for a given seed. */
export function buildSecretCorpus(seed = 20261201): SecretSample[] {
  const next = prng(seed);
  const samples: SecretSample[] = [];
  for (const spec of CORPUS_SPECS) {
    const family = familyOf(spec.id);
    const value = () => render(spec.parts, 'random', next) as string;
    if (spec.embed) {
      for (const [n, text] of spec.embed(value()).entries())
        samples.push({ ruleId: spec.id, family, kind: 'tp', shape: `custom-${n}`, text });
    } else if (spec.key) {
      const key = spec.key;
      for (const [shape, make] of TP_KEYED)
        samples.push({ ruleId: spec.id, family, kind: 'tp', shape, text: make(key, value()) });
    } else {
      for (const [shape, make] of TP_PREFIXED)
        samples.push({ ruleId: spec.id, family, kind: 'tp', shape, text: make(value()) });
    }
    // False positives: the same format filled with placeholders, in the rule's own embedding.
    const embedOne = (v: string): string =>
      spec.embed
        ? (spec.embed(v)[0] as string)
        : spec.key
          ? `${spec.key}_api_token = "${v}"`
          : `Deploy notes: the credential is ${v}\nkeep it safe.`;
    for (const fill of ['repeat', 'sequence', 'example'] as const) {
      const v = render(spec.parts, fill, next);
      if (v === null || (fill === 'example' && spec.noExample)) continue;
      samples.push({ ruleId: spec.id, family, kind: 'fp', shape: `placeholder-${fill}`, text: embedOne(v) });
    }
    if (spec.key) {
      const id = spec.key;
      samples.push(
        {
          ruleId: spec.id,
          family,
          kind: 'fp',
          shape: 'your-key',
          text: `${id}_api_key = "your-${id}-api-key"`,
        },
        {
          ruleId: spec.id,
          family,
          kind: 'fp',
          shape: 'angle-token',
          text: `${id.toUpperCase()}_TOKEN=<token>`,
        },
        {
          ruleId: spec.id,
          family,
          kind: 'fp',
          shape: 'env-reference',
          text: `${id}_token: \${${id.toUpperCase()}_TOKEN}`,
        },
        {
          ruleId: spec.id,
          family,
          kind: 'fp',
          shape: 'prose',
          text: `The ${id} API key is kept in the vault under "${id}-prod"; ask the on-call for access.`,
        },
      );
    }
  }
  const R = (alphabet: string, n: number) =>
    Array.from({ length: n }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
  for (const [n, [ruleId, text]] of nearMisses(R).entries())
    samples.push({ ruleId, family: familyOf(ruleId), kind: 'fp', shape: `near-miss-${n}`, text });
  for (const [n, text] of BENIGN_NOTES.entries())
    samples.push({ ruleId: 'generic-api-key', family: 'notes', kind: 'fp', shape: `note-${n}`, text });
  return samples;
}
