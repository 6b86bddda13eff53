// The labelled recall evaluation set (bench/recall-quality.ts): three memory directories shaped like the ones
// extraction writes (typed Markdown files with name/description frontmatter, some in subdirectories, mixed
// ages), each made of
//   - hand-written core memories, each with the prompts (paraphrased, not copied) that should recall it;
//   - superseded facts: an older and a newer memory stating conflicting values (same name in another file,
//     an explicit `supersedes:`, or a near-duplicate description), labelled "newer should, older should not";
//   - linked memories: a core memory whose body links `[[other]]`, the other labelled relevant too;
//   - near-duplicates that must stay apart (same subject, different content);
//   - non-English memories (German, French, Spanish, Japanese) with prompts in their language;
//   - seeded filler memories (component × aspect, with numbers and shared boilerplate words) as distractors,
//     some with their own prompts;
// plus prompts that concern nothing in the directory (run against every directory), several of which share
// only digits, short tokens or stop words with some memory. Any file not in a query's `should` list counts
// as a wrong pick; `shouldNot` marks the distractors that matter most (superseded and near-duplicate files).
// Deterministic: the same seed gives the same directories and queries.
import type { MemoryType } from '@engram/memory-core/memdir/memory-types';

export interface EvalMemory {
  file: string;
  type: MemoryType;
  name: string;
  description: string;
  body: string;
  ageDays: number;
  supersedes?: string[];
  modified?: string;
}

export type QueryKind =
  | 'paraphrase'
  | 'superseded'
  | 'linked'
  | 'non-english'
  | 'near-duplicate'
  | 'filler'
  | 'irrelevant'
  | 'held-out';

export interface EvalQuery {
  id: string;
  dir: string;
  kind: QueryKind;
  query: string;
  should: string[];
  shouldNot: string[];
}

export interface EvalDir {
  name: string;
  memories: EvalMemory[];
}

export interface RecallEval {
  dirs: EvalDir[];
  queries: EvalQuery[];
}

type Core = [file: string, type: MemoryType, name: string, description: string, queries: string[]];
type Superseded = {
  older: [file: string, description: string];
  newer: [file: string, description: string];
  name: string;
  type: MemoryType;
  how: 'same-name' | 'explicit' | 'near-duplicate';
  /** For near-duplicates the newer memory's name (same subject, reworded). */
  newerName?: string;
  query: string;
};
type Linked = { from: string; to: Core; query: string };
type NearDup = { a: Core; b: Core };

interface DirSpec {
  name: string;
  core: Core[];
  superseded: Superseded[];
  linked: Linked[];
  nearDup: NearDup[];
  components: string[];
  vocabulary: string[];
}

const WEBSHOP: DirSpec = {
  name: 'webshop',
  core: [
    [
      'feedback_pnpm.md',
      'feedback',
      'Use pnpm',
      'The user wants pnpm, never npm or yarn, for installs and scripts in this repo',
      ['install the dependencies for me', 'should I run yarn add for the new package?'],
    ],
    [
      'feedback_db_tests.md',
      'feedback',
      'Integration tests hit a real database',
      'Never mock the database in integration tests; a mocked suite once hid a broken migration',
      ['can I stub out postgres in the order repository tests?'],
    ],
    [
      'project_flags.md',
      'project',
      'Checkout feature flags',
      'Feature flags: checkout_v2 rolled out to 7% of traffic, express_pay off until the fraud review',
      ['is the new checkout flow enabled for everyone?', 'turn on express pay flag'],
    ],
    [
      'reference_grafana.md',
      'reference',
      'Latency dashboard',
      'The Grafana board "API latency" is what on-call watches for the storefront API',
      ['where can I see storefront latency graphs?'],
    ],
    [
      'user_role.md',
      'user',
      'Role',
      'Senior Go engineer, new to the React frontend; explain UI code with backend analogies',
      ['explain this React hook to me'],
    ],
    [
      'feedback_commits.md',
      'feedback',
      'Commit messages',
      'Commit subjects in imperative mood, under 72 characters, ticket id at the end in brackets',
      ['write a commit message for this change'],
    ],
    [
      'project_tax_rules.md',
      'project',
      'VAT calculation',
      'VAT is computed per line item with banker rounding; EU reverse charge applies to B2B customers',
      ['why is the tax total off by a cent on this invoice?'],
    ],
    [
      'reference_linear.md',
      'reference',
      'Issue tracker',
      'Storefront bugs are tracked in Linear project SHOP; ingest pipeline issues go to DATA',
      ['where should I file this storefront bug?'],
    ],
    [
      'feedback_css.md',
      'feedback',
      'Styling approach',
      'Use Tailwind utility classes; no new CSS modules, no styled-components',
      ['style this button with a new css module'],
    ],
    [
      'project_search_reindex.md',
      'project',
      'Search reindex',
      'Product search uses OpenSearch; a full reindex takes 40 minutes and must run off-peak',
      ['the product search results are stale, should I rebuild the index now?'],
    ],
    [
      'feedback_pr_size.md',
      'feedback',
      'Small pull requests',
      'Keep pull requests under 400 changed lines; split refactors from behaviour changes',
      ['this PR is getting huge, is that a problem?'],
    ],
    [
      'reference_staging.md',
      'reference',
      'Staging environment',
      'Staging lives at shop-staging with seeded catalogue data; reset it with make reset-staging',
      ['how do I wipe the staging catalogue?'],
    ],
    [
      'project_payment_provider.md',
      'project',
      'Payment provider',
      'Payments go through Adyen; Stripe code paths are legacy and scheduled for removal',
      ['add apple pay support to the payment integration'],
    ],
    [
      'feedback_error_handling.md',
      'feedback',
      'Error handling style',
      'Return typed Result values from services; throw only for programmer errors',
      ['should this service function throw when the coupon is invalid?'],
    ],
    [
      'project_image_cdn.md',
      'project',
      'Product images',
      'Product images are served by Cloudinary with automatic WebP; never commit images to the repo',
      ['where do product photos get stored?'],
    ],
    [
      'user_timezone.md',
      'user',
      'Working hours',
      'The user works from Lisbon, mornings only; schedule reviews before noon WET',
      ['when is a good slot for a code review with me?'],
    ],
    [
      'reference_runbook_outage.md',
      'reference',
      'Outage runbook',
      'Storefront outage runbook: status page first, then the incident channel, then roll back the last deploy',
      ['the storefront is down, what do I do first?'],
    ],
    [
      'project_accessibility.md',
      'project',
      'Accessibility target',
      'The storefront targets WCAG 2.2 AA; every new component needs keyboard navigation and aria labels',
      ['does the new dropdown need keyboard support?'],
    ],
    [
      'feedback_i18n.md',
      'feedback',
      'Translations',
      'All customer-facing strings go through the i18n catalogue; German and French translations are reviewed by the Berlin team',
      ['add a new label to the cart page'],
    ],
    [
      'project_load_test.md',
      'project',
      'Black Friday load test',
      'Load tests with k6 must reach 3000 orders per minute before the November freeze',
      ['how much traffic should the checkout handle under load?'],
    ],
  ],
  superseded: [
    {
      older: ['project_deploy_day.md', 'Production deploys happen on Tuesday afternoons'],
      newer: [
        'topics/deploy_day.md',
        'Production deploys moved to Thursday mornings after the on-call change',
      ],
      name: 'Deploy day',
      type: 'project',
      how: 'same-name',
      query: 'which day do we ship to production?',
    },
    {
      older: ['reference_api_base.md', 'The partner API base URL is api.partner-v1.shop.internal'],
      newer: [
        'reference_api_base_v2.md',
        'The partner API moved to gateway.shop.internal/partner; v1 host is gone',
      ],
      name: 'Partner API host',
      type: 'reference',
      how: 'explicit',
      query: 'what host do partner API calls go to?',
    },
    {
      older: ['project_node_version.md', 'Storefront runs on Node 18 LTS in production containers'],
      newer: [
        'project_node_runtime.md',
        'Storefront runs on Node 22 LTS in production containers since the upgrade',
      ],
      name: 'Node runtime version',
      newerName: 'Node runtime version upgrade',
      type: 'project',
      how: 'near-duplicate',
      query: 'which node version does production use?',
    },
  ],
  linked: [
    {
      from: 'reference_runbook_outage.md',
      to: [
        'reference_rollback.md',
        'reference',
        'Rollback procedure',
        'Roll back with the deploy tool: pick the previous release tag and confirm the canary',
        [''],
      ],
      query: 'the storefront is down after the release, what now?',
    },
    {
      from: 'project_payment_provider.md',
      to: [
        'project_adyen_webhooks.md',
        'project',
        'Adyen notifications',
        'Adyen sends HMAC-signed notifications to /hooks/adyen; verify the signature before trusting them',
        [''],
      ],
      query: 'wire up a new payment method in the integration',
    },
  ],
  nearDup: [
    {
      a: [
        'project_cart_checklist.md',
        'project',
        'Cart release checklist',
        'Before releasing cart changes: update the price snapshot tests and notify customer support',
        ['what do I need to do before releasing cart changes?'],
      ],
      b: [
        'project_cart_rollback.md',
        'project',
        'Cart rollback notes',
        'If a cart release misbehaves, disable the cart_v3 flag and purge the basket cache',
        ['the cart release is misbehaving, how do I undo it?'],
      ],
    },
  ],
  components: [
    'storefront',
    'basket',
    'coupon',
    'catalogue',
    'inventory',
    'shipping',
    'returns',
    'reviews',
    'wishlist',
    'newsletter',
    'invoices',
    'loyalty',
    'gift cards',
    'recommendations',
    'sitemap',
  ],
  vocabulary: [
    'latency',
    'budget',
    'owner',
    'alert',
    'threshold',
    'migration',
    'contract',
    'dashboard',
    'fixture',
    'cache',
    'timeout',
    'retry',
    'queue',
    'export',
    'audit',
  ],
};

const DATAPLAT: DirSpec = {
  name: 'dataplat',
  core: [
    [
      'feedback_sql_style.md',
      'feedback',
      'SQL style',
      'Lower-case SQL keywords, one column per line, CTEs instead of nested subqueries',
      ['format this query the way we like it'],
    ],
    [
      'project_kafka_topics.md',
      'project',
      'Kafka topic naming',
      'Topics are named domain.entity.event.v1; never reuse a topic name after deleting it',
      ['what should I call the new orders topic?'],
    ],
    [
      'reference_airflow.md',
      'reference',
      'Airflow',
      'Batch jobs run in Airflow at airflow.data.internal; DAG owners are listed in the dags/OWNERS file',
      ['who owns the nightly revenue DAG?'],
    ],
    [
      'project_retention.md',
      'project',
      'Raw data retention',
      'Raw events are kept 30 days in the landing bucket, then only aggregates survive',
      ['how long do we keep raw clickstream events?'],
    ],
    [
      'feedback_notebooks.md',
      'feedback',
      'No notebooks in prod',
      'Jupyter notebooks are for exploration only; production transforms live in dbt models',
      ['can I schedule this notebook to run every night?'],
    ],
    [
      'project_pii.md',
      'project',
      'PII handling',
      'Emails and phone numbers are hashed with a salted SHA-256 before they reach the warehouse',
      ['can I join on customer email in the warehouse?'],
    ],
    [
      'reference_dbt_docs.md',
      'reference',
      'dbt docs',
      'The dbt docs site is rebuilt on every merge and published at docs.data.internal',
      ['where is the lineage graph for our models?'],
    ],
    [
      'user_background.md',
      'user',
      'Background',
      'Statistician by training, comfortable with R, learning Python packaging',
      ['how do I publish my python package internally?'],
    ],
    [
      'project_spark_cluster.md',
      'project',
      'Spark cluster sizing',
      'The shared Spark cluster autoscales between 4 and 40 executors; heavy backfills need a ticket',
      ['I want to backfill two years of events, can I just launch it?'],
    ],
    [
      'feedback_tests_dbt.md',
      'feedback',
      'Model tests',
      'Every dbt model needs unique and not_null tests on its primary key before review',
      ['what tests should the new customers model have?'],
    ],
    [
      'project_warehouse.md',
      'project',
      'Warehouse',
      'The warehouse is Snowflake; BigQuery datasets are read-only mirrors for marketing',
      ['should I create the new table in bigquery?'],
    ],
    [
      'reference_oncall_data.md',
      'reference',
      'Data on-call',
      'Data on-call rotates weekly; the schedule and escalation policy live in PagerDuty under DATA-PLATFORM',
      ['who do I page when the ingestion lag alarm fires?'],
    ],
    [
      'project_schema_registry.md',
      'project',
      'Schema registry',
      'Avro schemas are registered with backward compatibility; breaking changes need a new topic version',
      ['can I rename a field in the orders event schema?'],
    ],
    [
      'feedback_python_tooling.md',
      'feedback',
      'Python tooling',
      'Use uv for environments and ruff for linting; no pip install into the system interpreter',
      ['set up a virtualenv for this repo'],
    ],
    [
      'project_cost_alerts.md',
      'project',
      'Cloud cost alerts',
      'Warehouse credits above 500 per day trigger a cost alert to the platform lead',
      ['why did I get a warehouse credits alert?'],
    ],
    [
      'reference_looker.md',
      'reference',
      'Looker',
      'Business dashboards live in Looker; explores are generated from the semantic layer, never hand-edited',
      ['I need to change the revenue explore in looker'],
    ],
  ],
  superseded: [
    {
      older: ['project_ingest_owner.md', 'Ingestion pipeline is owned by the Falcon team'],
      newer: ['topics/ingest_owner.md', 'Ingestion pipeline ownership moved to the Otter team in the reorg'],
      name: 'Ingestion owner',
      type: 'project',
      how: 'same-name',
      query: 'which team owns ingestion?',
    },
    {
      older: ['project_backfill_window.md', 'Backfills may run only on weekends'],
      newer: ['project_backfill_policy.md', 'Backfills may run any night between 01:00 and 05:00 UTC'],
      name: 'Backfill window',
      type: 'project',
      how: 'explicit',
      query: 'when am I allowed to run a backfill?',
    },
    {
      older: ['project_python_version.md', 'Data jobs run on Python 3.10 images in the scheduler'],
      newer: [
        'project_python_runtime.md',
        'Data jobs run on Python 3.12 images in the scheduler after the base image bump',
      ],
      name: 'Python runtime version',
      newerName: 'Python runtime version bump',
      type: 'project',
      how: 'near-duplicate',
      query: 'what python version do the scheduled jobs use?',
    },
  ],
  linked: [
    {
      from: 'project_schema_registry.md',
      to: [
        'reference_compat_modes.md',
        'reference',
        'Compatibility modes',
        'BACKWARD lets consumers on the new schema read old data; FULL is required for shared topics',
        [''],
      ],
      query: 'is adding an optional field to the orders event safe?',
    },
    {
      from: 'reference_oncall_data.md',
      to: [
        'reference_lag_runbook.md',
        'reference',
        'Consumer lag runbook',
        'When consumer lag grows, check broker disk first, then restart the stuck connector',
        [''],
      ],
      query: 'the ingestion lag alarm just fired, what should I check?',
    },
  ],
  nearDup: [
    {
      a: [
        'project_dbt_naming.md',
        'project',
        'dbt model naming',
        'Staging models are stg_<source>__<entity>; marts are named after business concepts',
        ['how should I name the new staging model?'],
      ],
      b: [
        'project_dbt_layout.md',
        'project',
        'dbt project layout',
        'Models are grouped in staging, intermediate and marts folders; seeds live next to their consumers',
        ['which folder does an intermediate model go in?'],
      ],
    },
  ],
  components: [
    'clickstream',
    'billing export',
    'attribution',
    'forecasting',
    'churn model',
    'identity graph',
    'ad spend',
    'survey',
    'geo lookup',
    'currency rates',
    'sessionization',
    'fraud scores',
    'catalog sync',
    'partner feed',
    'ledger',
  ],
  vocabulary: [
    'freshness',
    'owner',
    'sla',
    'partition',
    'backfill',
    'schema',
    'lineage',
    'quota',
    'alert',
    'threshold',
    'sampling',
    'dedup',
    'watermark',
    'snapshot',
    'retention',
  ],
};

const MOBILE: DirSpec = {
  name: 'mobile',
  core: [
    [
      'feedback_kotlin_style.md',
      'feedback',
      'Kotlin style',
      'Prefer sealed interfaces for UI state; no LiveData in new screens, use StateFlow',
      ['how should I model the loading state of the profile screen?'],
    ],
    [
      'project_release_train.md',
      'project',
      'Release train',
      'App releases ship every second Wednesday; the branch is cut on Monday morning',
      ['when is the next app store submission?'],
    ],
    [
      'reference_crashlytics.md',
      'reference',
      'Crash reports',
      'Crashes are triaged in Firebase Crashlytics; the top 5 crashes get a ticket every Monday',
      ['where can I see why the app crashed for users?'],
    ],
    [
      'user_device.md',
      'user',
      'Test devices',
      'The user tests on a Pixel 8 and an iPhone 13 mini; small screens matter to them',
      ['check this layout on a small phone'],
    ],
    [
      'feedback_swiftui.md',
      'feedback',
      'SwiftUI first',
      'New iOS screens are written in SwiftUI; UIKit only behind existing view controllers',
      ['build the settings page in UIKit?'],
    ],
    [
      'project_min_os.md',
      'project',
      'Minimum OS versions',
      'Minimum supported versions are Android 9 and iOS 16; older devices get a store block',
      ['can I use an API that needs iOS 17?'],
    ],
    [
      'reference_design_system.md',
      'reference',
      'Design system',
      'Components come from the Orbit design system in Figma; tokens sync to code nightly',
      ['which button component should the onboarding screen use?'],
    ],
    [
      'project_offline_mode.md',
      'project',
      'Offline mode',
      'The app caches the last 50 orders in Room/Core Data so order history works offline',
      ['does order history work without network?'],
    ],
    [
      'feedback_snapshot_tests.md',
      'feedback',
      'Snapshot tests',
      'Every new screen gets Paparazzi (Android) and swift-snapshot-testing (iOS) snapshot tests',
      ['what tests do I add for this new screen?'],
    ],
    [
      'project_push.md',
      'project',
      'Push notifications',
      'Push goes through Firebase Cloud Messaging on both platforms; marketing pushes need opt-in',
      ['send a promotional notification to all users'],
    ],
    [
      'reference_beta.md',
      'reference',
      'Beta testers',
      'Beta builds go to TestFlight and the Play internal track; the beta group is 200 staff',
      ['how do I get a test build to colleagues?'],
    ],
    [
      'project_deeplinks.md',
      'project',
      'Deep links',
      'Deep links use the shopapp:// scheme plus verified universal/app links for product pages',
      ['open the product page from an email link'],
    ],
    [
      'feedback_strings.md',
      'feedback',
      'No hard-coded strings',
      'All user-visible text goes through the strings catalogue; lint fails on literals in views',
      ['add a welcome message to the home screen'],
    ],
    [
      'project_analytics_events.md',
      'project',
      'Analytics events',
      'Analytics events are snake_case, declared in events.yaml and generated for both platforms',
      ['track when a user taps the share button'],
    ],
    [
      'reference_signing.md',
      'reference',
      'App signing',
      'Signing keys are in the CI keystore; release builds are signed only by the release pipeline',
      ['how do I sign a release build locally?'],
    ],
  ],
  superseded: [
    {
      older: ['project_api_client.md', 'Network calls use Retrofit with Gson converters'],
      newer: [
        'topics/api_client.md',
        'Network calls use Ktor client with kotlinx.serialization after the migration',
      ],
      name: 'Network client',
      type: 'project',
      how: 'same-name',
      query: 'which http library do we use for network calls on android?',
    },
    {
      older: ['project_ci_provider.md', 'Mobile CI runs on Bitrise'],
      newer: [
        'project_ci_migration.md',
        'Mobile CI runs on GitHub Actions macOS runners; Bitrise was switched off',
      ],
      name: 'Mobile CI',
      type: 'project',
      how: 'explicit',
      query: 'where do the mobile CI builds run?',
    },
    {
      older: ['project_kotlin_version.md', 'The Android app builds with Kotlin 1.9 and the K1 compiler'],
      newer: [
        'project_kotlin_compiler.md',
        'The Android app builds with Kotlin 2.1 and the K2 compiler since the toolchain upgrade',
      ],
      name: 'Kotlin compiler version',
      newerName: 'Kotlin compiler version upgrade',
      type: 'project',
      how: 'near-duplicate',
      query: 'which kotlin compiler version do we build with?',
    },
  ],
  linked: [
    {
      from: 'project_release_train.md',
      to: [
        'reference_release_checklist.md',
        'reference',
        'Store submission checklist',
        'Bump the build number, attach the changelog, and request expedited review only for hotfixes',
        [''],
      ],
      query: 'prepare the next app store submission',
    },
    {
      from: 'project_push.md',
      to: [
        'project_push_consent.md',
        'project',
        'Notification consent',
        'Consent is stored per device; respect the quiet hours set in the profile',
        [''],
      ],
      query: 'send a promotional notification to everyone tonight',
    },
  ],
  nearDup: [
    {
      a: [
        'project_onboarding_flow.md',
        'project',
        'Onboarding flow',
        'Onboarding has three screens: welcome, permissions, account; skipping is allowed after the first',
        ['how many screens does onboarding have?'],
      ],
      b: [
        'project_onboarding_metrics.md',
        'project',
        'Onboarding metrics',
        'Onboarding completion is measured from first launch to account created, reported weekly',
        ['how do we measure onboarding completion?'],
      ],
    },
  ],
  components: [
    'login',
    'cart screen',
    'search bar',
    'order tracking',
    'profile',
    'wallet',
    'map view',
    'chat support',
    'camera scan',
    'widgets',
    'settings',
    'notifications inbox',
    'referrals',
    'ratings prompt',
    'dark theme',
  ],
  vocabulary: [
    'owner',
    'crash',
    'budget',
    'startup',
    'frame',
    'memory',
    'flag',
    'experiment',
    'permission',
    'cache',
    'timeout',
    'retry',
    'accessibility',
    'screenshot',
    'battery',
  ],
};

/** Non-English memories and prompts, per directory. */
const NON_ENGLISH: Record<string, Core[]> = {
  webshop: [
    [
      'feedback_de_reviews.md',
      'feedback',
      'Code-Reviews auf Deutsch',
      'Das Berliner Team schreibt Review-Kommentare auf Deutsch; Zusammenfassungen bitte zweisprachig',
      ['Sollen meine Review-Kommentare für das Berliner Team auf Deutsch sein?'],
    ],
    [
      'project_de_versand.md',
      'project',
      'Versandkosten',
      'Versandkosten innerhalb Deutschlands sind ab 50 Euro Bestellwert kostenlos',
      ['Ab welchem Bestellwert ist der Versand kostenlos?'],
    ],
  ],
  dataplat: [
    [
      'project_fr_rgpd.md',
      'project',
      'Conformité RGPD',
      'Les demandes de suppression RGPD sont traitées sous 30 jours par le job gdpr_erasure',
      ['Comment traiter une demande de suppression RGPD ?'],
    ],
    [
      'reference_ja_dashboard.md',
      'reference',
      '売上ダッシュボード',
      '日次の売上ダッシュボードは東京チームが管理し、毎朝9時に更新されます',
      ['売上ダッシュボードは誰が管理していますか？'],
    ],
  ],
  mobile: [
    [
      'project_es_tienda.md',
      'project',
      'Ficha de la tienda',
      'Las capturas de la ficha de la tienda se actualizan en cada versión mayor por el equipo de Madrid',
      ['¿Quién actualiza las capturas de la ficha de la tienda?'],
    ],
    [
      'feedback_es_textos.md',
      'feedback',
      'Textos en español',
      'Los textos en español usan tuteo y evitan anglicismos innecesarios',
      ['¿Los textos de la aplicación deben usar tuteo o usted?'],
    ],
  ],
};

/** Prompts that concern nothing in any directory (several share only digits, short tokens or stop words). */
export const IRRELEVANT_QUERIES = [
  'a short poem about penguins sliding on ice',
  'write 7 haiku about autumn leaves',
  'what is 2 + 2?',
  'tell me a joke',
  'how are you today?',
  'recommend a good science fiction novel',
  'what is the weather like in Lisbon this weekend',
  'explain the rules of chess to a beginner',
  'give me a recipe for banana bread',
  'what year did the Berlin wall fall',
  'summarize the plot of Hamlet',
  '¿cuál es la capital de Perú?',
  'écris un poème sur la mer',
  '今日の天気はどうですか',
  'list 10 fun facts about octopuses',
  'is it ok to be ok?',
  'hi',
  'thanks, that was all for now',
  'convert 5 km to miles',
  'who won the football world cup in 2018',
  'help me plan a 3 day trip to Rome',
  'draw an ascii cat',
  'what is the meaning of life',
  'sing me a song about the sea',
  'wie spät ist es in Tokio?',
];

/**
 * Held-out prompts, added after the first calibration and kept out of it (bench/recall-quality.ts reports
 * them on their own line): new wordings for memories the set already has — some sharing the memory's
 * vocabulary, some only its subject — and prompts about nothing in the directory that share one rare word
 * with some memory ("Berlin", "Lisbon", "rule"). `should` empty: nothing is relevant. The seeds only move
 * ages and filler numbers, so a seed is not a held-out set; these prompts are.
 */
export const HELD_OUT: Record<string, Array<[query: string, should: string[], shouldNot?: string[]]>> = {
  webshop: [
    ['npm install keeps failing with a peer dependency error', ['feedback_pnpm.md']],
    ['mock the db layer so the integration suite runs faster', ['feedback_db_tests.md']],
    ['what percentage of traffic gets checkout v2?', ['project_flags.md']],
    ['how does the VAT reverse charge work for B2B customers?', ['project_tax_rules.md']],
    ['the opensearch reindex is slow, can I run it at lunchtime?', ['project_search_reindex.md']],
    ['can I add a styled-components theme for the header?', ['feedback_css.md']],
    ['reset the staging data before the demo', ['reference_staging.md']],
    ['migrate the remaining Stripe calls', ['project_payment_provider.md']],
    ['upload the new hero images into the repo assets folder', ['project_image_cdn.md']],
    ['which Grafana board shows API latency?', ['reference_grafana.md']],
    [
      'what node LTS are the production containers on?',
      ['project_node_runtime.md'],
      ['project_node_version.md'],
    ],
    ['what WCAG level do we have to meet?', ['project_accessibility.md']],
    ['who reviews the French translations?', ['feedback_i18n.md']],
    ['write a k6 script for the Black Friday test', ['project_load_test.md']],
  ],
  dataplat: [
    ['should SQL keywords be upper-case in this CTE?', ['feedback_sql_style.md']],
    ['can I reuse the name of a kafka topic we deleted last month?', ['project_kafka_topics.md']],
    ['where do I find who owns an airflow DAG?', ['reference_airflow.md']],
    ['how many executors can my spark job get?', ['project_spark_cluster.md']],
    ['is snowflake or bigquery our main warehouse?', ['project_warehouse.md']],
    ['hash the phone numbers before loading them', ['project_pii.md']],
    ['pip install pandas into the system python', ['feedback_python_tooling.md']],
    ['the dbt docs site looks out of date', ['reference_dbt_docs.md']],
    ['which tests does the primary key of a dbt model need?', ['feedback_tests_dbt.md']],
    ['who is on data on-call this week?', ['reference_oncall_data.md']],
    ['BACKWARD or FULL compatibility for a shared topic?', ['reference_compat_modes.md']],
    ['consumer lag keeps growing on the connector', ['reference_lag_runbook.md']],
  ],
  mobile: [
    ['use LiveData for the checkout screen state', ['feedback_kotlin_style.md']],
    ['on which day is the release branch cut?', ['project_release_train.md']],
    ['which crashes get a ticket in crashlytics?', ['reference_crashlytics.md']],
    ['is Android 8 still supported?', ['project_min_os.md']],
    ['where are the Figma tokens for the Orbit components?', ['reference_design_system.md']],
    ['add a Paparazzi snapshot for the cart screen', ['feedback_snapshot_tests.md']],
    ['push a TestFlight build to the beta group', ['reference_beta.md']],
    ['declare a new analytics event for checkout', ['project_analytics_events.md']],
    ['where is the release keystore?', ['reference_signing.md']],
    ['is Retrofit still our network library?', ['topics/api_client.md'], ['project_api_client.md']],
    [
      'how many onboarding screens are there, and can users skip them?',
      ['project_onboarding_flow.md'],
      ['project_onboarding_metrics.md'],
    ],
  ],
};
/** Held-out prompts about nothing in any directory (run against every directory). */
export const HELD_OUT_IRRELEVANT = [
  'book a table for two in Berlin tonight',
  'explain the offside rule in football',
  'plan a team offsite in Lisbon',
  'what is the best phone to buy this year',
  'write a cover letter for a barista job',
  'how tall is the Eiffel tower',
  'how do I bake sourdough bread with rye flour',
  'translate good morning into Japanese',
];

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TYPES: MemoryType[] = ['project', 'reference', 'feedback', 'project', 'reference'];
const ASPECTS: Array<
  [
    aspect: string,
    template: (c: string, v: string, n: number) => string,
    query: (c: string, v: string) => string,
  ]
> = [
  [
    'owner',
    (c, v, n) => `The ${c} ${v} is owned by squad ${n}; ask them before changing it`,
    (c, v) => `who is responsible for the ${c} ${v}?`,
  ],
  [
    'alerting',
    (c, v, n) => `Alert on the ${c} ${v} when it exceeds ${n} for ten minutes`,
    (c, v) => `what alert fires for the ${c} ${v}?`,
  ],
  [
    'runbook',
    (c, v) => `Runbook for ${c} ${v} incidents: check the dashboard, then the last deploy`,
    (c, v) => `there is an incident with ${c} ${v}, where is the runbook?`,
  ],
  [
    'limits',
    (c, v, n) => `The ${c} ${v} limit is ${n} per minute per customer`,
    (c, v) => `what is the ${c} ${v} limit?`,
  ],
  [
    'history',
    (c, v, n) => `The ${c} ${v} was redesigned in ${2019 + (n % 6)} after repeated incidents`,
    (c, v) => `why was the ${c} ${v} redesigned?`,
  ],
];

function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_|_$/g, '');
}

function bodyOf(description: string, links: string[] = []): string {
  const see = links.length > 0 ? `\n\nSee also ${links.map((l) => `[[${l}]]`).join(', ')}.` : '';
  return `${description}.\n\n**Why:** agreed with the team after it came up in review.\n**How to apply:** follow it in this repository unless the user says otherwise.${see}\n`;
}

/** The evaluation set for `seed` (directories with their files, and the labelled prompts). */
export function buildRecallEval(seed = 20261201): RecallEval {
  const next = prng(seed);
  const dirs: EvalDir[] = [];
  const queries: EvalQuery[] = [];
  let qid = 0;
  const push = (dir: string, kind: QueryKind, query: string, should: string[], shouldNot: string[] = []) => {
    if (query === '') return;
    queries.push({ id: `q${String(++qid).padStart(3, '0')}`, dir, kind, query, should, shouldNot });
  };

  for (const spec of [WEBSHOP, DATAPLAT, MOBILE]) {
    const memories: EvalMemory[] = [];
    const age = () => 1 + Math.floor(next() * 120);
    const linkTargets = new Map(spec.linked.map((l) => [l.from, l]));
    const addCore = ([file, type, name, description]: Core, ageDays = age()) => {
      const link = linkTargets.get(file);
      const target = link ? link.to[0].replace(/\.md$/, '') : undefined;
      memories.push({
        file,
        type,
        name,
        description,
        body: bodyOf(description, target ? [target] : []),
        ageDays,
      });
    };
    for (const core of spec.core) {
      addCore(core);
      const [file, , , , prompts] = core;
      for (const q of prompts) push(spec.name, 'paraphrase', q, [file]);
    }
    for (const core of NON_ENGLISH[spec.name] ?? []) {
      addCore(core);
      for (const q of core[4]) push(spec.name, 'non-english', q, [core[0]]);
    }
    for (const s of spec.superseded) {
      const olderAge = 60 + Math.floor(next() * 60);
      const newerAge = 1 + Math.floor(next() * 20);
      memories.push({
        file: s.older[0],
        type: s.type,
        name: s.name,
        description: s.older[1],
        body: bodyOf(s.older[1]),
        ageDays: olderAge,
      });
      const newer: EvalMemory = {
        file: s.newer[0],
        type: s.type,
        name:
          s.how === 'near-duplicate'
            ? (s.newerName ?? s.name)
            : s.how === 'explicit'
              ? `${s.name} (current)`
              : s.name,
        description: s.newer[1],
        body: bodyOf(s.newer[1]),
        ageDays: newerAge,
      };
      if (s.how === 'explicit') newer.supersedes = [s.older[0].replace(/\.md$/, '')];
      memories.push(newer);
      push(spec.name, 'superseded', s.query, [s.newer[0]], [s.older[0]]);
    }
    for (const l of spec.linked) {
      addCore(l.to);
      push(spec.name, 'linked', l.query, [l.from, l.to[0]]);
    }
    for (const { a, b } of spec.nearDup) {
      addCore(a);
      addCore(b);
      push(spec.name, 'near-duplicate', a[4][0] as string, [a[0]], [b[0]]);
      push(spec.name, 'near-duplicate', b[4][0] as string, [b[0]], [a[0]]);
    }
    // Fillers: component × aspect, with numbers and the directory's shared vocabulary.
    let fillerQueries = 0;
    for (const [ci, component] of spec.components.entries()) {
      for (const [ai, [aspect, template, question]] of ASPECTS.entries()) {
        const v = spec.vocabulary[(ci * 3 + ai) % spec.vocabulary.length] as string;
        const n = 2 + Math.floor(next() * 97);
        const name = `${component} ${v} ${aspect}`;
        const file = `${ai % 2 === 0 ? '' : 'topics/'}${TYPES[ai]}_${slug(component)}_${slug(v)}_${aspect}.md`;
        const description = template(component, v, n);
        memories.push({
          file,
          type: TYPES[ai] as MemoryType,
          name,
          description,
          body: bodyOf(description),
          ageDays: age(),
        });
        if ((ci * 7 + ai * 3) % 6 === 0 && fillerQueries < 14) {
          fillerQueries += 1;
          push(spec.name, 'filler', question(component, v), [file]);
        }
      }
    }
    for (const q of IRRELEVANT_QUERIES) push(spec.name, 'irrelevant', q, []);
    dirs.push({ name: spec.name, memories });
  }
  // After every directory, so the ids above stay what they were before the held-out prompts existed.
  for (const dir of dirs) {
    for (const [query, should, shouldNot] of HELD_OUT[dir.name] ?? [])
      push(dir.name, 'held-out', query, should, shouldNot ?? []);
    for (const query of HELD_OUT_IRRELEVANT) push(dir.name, 'held-out', query, []);
  }
  for (const q of queries) {
    const files = new Set(dirs.find((d) => d.name === q.dir)?.memories.map((m) => m.file));
    const unknown = [...q.should, ...q.shouldNot].filter((f) => !files.has(f));
    if (unknown.length > 0) throw new Error(`${q.id} labels files not in ${q.dir}: ${unknown.join(', ')}`);
  }
  return { dirs, queries };
}
