import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'data/**', 'node_modules/**', 'coverage/**', 'reports/**', '.stryker-tmp/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly',
        clearInterval: 'readonly', URL: 'readonly', performance: 'readonly', fetch: 'readonly', AbortController: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // Lines up to 200 characters (issue 48), everywhere `eslint .` looks: src/, and test/ and bench/
  // too, since they are read and reviewed like it. Strings and template literals count: ignoring
  // them would exempt nearly every long line (a log call, an error, a SQL statement holds one), and
  // such a line splits readably at its arguments. URLs and regular expressions do not split.
  { rules: { 'max-len': ['error', { code: 200, ignoreUrls: true, ignoreRegExpLiterals: true }] } },
  // No function over 80 lines and no file over 400 in the gateway itself (issue 48): a longer one is
  // split into named pieces a stack trace and a reader can find (blank lines and comments count).
  { files: ['src/**/*.ts'], rules: { 'max-lines-per-function': ['error', { max: 80 }], 'max-lines': ['error', { max: 400 }] } },
  // Files that still hold a longer line, exempt until they are wrapped; the list only shrinks.
  {
    files: [
      'scripts/deps.mjs',
      'test/architecture/imports.test.ts',
    'bench/common.mjs',
    'bench/instructions.mjs',
    'bench/run.mjs',
    'bench/sizing.mjs',
    'bench/soak.mjs',
    'console/app.js',
    'scripts/console-screenshots.mjs',
    'src/admin/app.ts',
    'src/admin/console.ts',
    'src/auth/credentials.ts',
    'src/auth/links/links.ts',
    'src/auth/providers/github.ts',
    'src/cli/help.ts',
    'src/cli/start.ts',
    'src/cli/storage.ts',
    'src/cli/users.ts',
    'src/config/load.ts',
    'src/config/schema.ts',
    'src/config/schema/providers.ts',
    'src/config/schema/routes.ts',
    'src/demo/githubFake.ts',
    'src/demo/servers.ts',
    'src/demo/walkthrough.ts',
    'src/instance.ts',
    'src/listener/unparsable.ts',
    'src/live/reload.ts',
    'src/openapi.ts',
    'src/pipeline/guards/dailyLimit.ts',
    'src/proxy/forwarder.ts',
    'src/proxy/headers.ts',
    'src/storage/identities.ts',
    'src/storage/passkeys.ts',
    'src/telemetry/tracing.ts',
    'test/admin/console.test.ts',
    'test/assertion/assertion.security.test.ts',
    'test/auth/bodyFraming.test.ts',
    'test/auth/github.test.ts',
    'test/auth/oidc.test.ts',
    'test/auth/password.test.ts',
    'test/auth/sessions.test.ts',
    'test/browser/console.test.ts',
    'test/cli/nodeVersion.test.ts',
    'test/config/load.test.ts',
    'test/config/schemaAgreement.test.ts',
    'test/decisions/proxies.test.ts',
    'test/docs/commands.test.ts',
    'test/docs/examples.test.ts',
    'test/guards/planQuotas.test.ts',
    'test/helpers/gatewayProcess.ts',
    'test/helpers/http.ts',
    'test/listener/https.test.ts',
    'test/ops/postgresOutage.test.ts',
    'test/ops/workers.test.ts',
    'test/proxy/caseFolds.security.test.ts',
    'test/proxy/headerRules.test.ts',
    'test/proxy/headers.test.ts',
    'test/proxy/routing.security.test.ts',
    'test/proxy/websocket.test.ts',
    'test/routing/cors.test.ts',
    'test/storage/accountsMigration.test.ts',
    'test/storage/dirLock.test.ts',
    'test/telemetry/tracing.test.ts',
    'test/user/me.test.ts',
    ],
    rules: { 'max-len': 'off' },
  },
  // The console's page script runs in the browser.
  {
    files: ['console/**/*.js'],
    languageOptions: {
      globals: { document: 'readonly', location: 'readonly', Node: 'readonly', URLSearchParams: 'readonly', addEventListener: 'readonly', history: 'readonly', uPlot: 'readonly' },
    },
  },
);
