// `gateway migrate`, `gateway keys rotate` and `keys rotate-jwt`: the commands that change the database's shape or keys.
import { loadConfig } from '../config/load.js';
import { adminKeyFor, callAdmin } from './adminClient.js';
import { CommandError, print, withDatabase, type Args } from './command.js';

export async function migrateCommand({ config: configPath }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const [{ migrate }, { waitForPostgres }] = await Promise.all([import('../storage/database/migrations.js'), import('../storage/database/startWait.js')]);
  // A migration Job starts beside its Postgres as the gateway does: it waits the same way (stdout keeps the result alone).
  if (config.storage.postgres) await waitForPostgres(config.storage.postgres, config.storage.startTimeout, { warn: (_fields, msg) => console.error(`gateway: ${msg}`) });
  const applied = await withDatabase(config, (db) => migrate(db), { migrated: false });
  return print(applied.length ? `applied: ${applied.join(', ')}` : 'nothing to apply');
}

export async function rotateKeys({ config: configPath, admin }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  if (admin) {
    throw new CommandError('the admin API does not rotate keys: run `gateway keys rotate` where it can open the database '
      + '(on Postgres, anywhere; on embedded storage, with the gateway stopped)');
  }
  const [{ rotateAssertionKeys }, { RETIRED_KEY_PUBLISHED_MS }] = await Promise.all([import('../credentials/assertionKeys.js'), import('../credentials/assertionKeyring.js')]);
  const { current, previous, next } = await withDatabase(config, (db) => rotateAssertionKeys(db));
  // Running instances pick the rotation up through NOTIFY (or their periodic reload).
  return print(`assertion key rotated: now signing with kid ${current}`
    + (previous ? `; ${previous} stays published for ${RETIRED_KEY_PUBLISHED_MS / 1000} s` : '') + `; next kid ${next} is published ahead`);
}

/**
 * `gateway keys rotate-jwt [--drop-previous]`: rotates the HS256 secret the database keeps (auth.jwt.secret
 * empty). A key written in gateway.yaml rotates by editing the file and SIGHUP instead.
 */
export async function rotateJwtKey({ config: configPath, admin, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  if (admin) {
    throw new CommandError('the admin API does not rotate keys: run `gateway keys rotate-jwt` where it can open the database '
      + '(on Postgres, anywhere; on embedded storage, with the gateway stopped)');
  }
  const { isDatabaseKept } = await import('../credentials/tokenKeys.js');
  const { jwt, refreshTokenTtl } = config.auth;
  if (!isDatabaseKept(jwt)) {
    const setting = jwt.algorithm === 'HS256' ? 'auth.jwt.secret' : 'auth.jwt.privateKeyFile';
    throw new CommandError(`the token key is in the configuration (${setting}), not in the database: put it under auth.jwt.previous, set a new one, `
      + 'then send SIGHUP to the gateway (docs/operating.md, "Rotating the signing key")');
  }
  const { dropPreviousSecret, rotateStoredSecret } = await import('../credentials/jwtSecrets.js');
  if (values['drop-previous']) {
    const dropped = await withDatabase(config, (db) => dropPreviousSecret(db, refreshTokenTtl));
    return print(dropped ? `previous token key ${dropped} dropped: every session it signed has ended` : 'no previous token key to drop');
  }
  const result = await withDatabase(config, (db) => rotateStoredSecret(db, refreshTokenTtl));
  if (!result.rotated) {
    throw new CommandError(`the previous token key ${result.previousKid} still verifies sessions it signed (until ${result.previousUntil.toISOString()}): rotating again would end them. ` +
      'Wait until then, or run `gateway keys rotate-jwt --drop-previous` first to end them now');
  }
  // Running instances pick the rotation up through NOTIFY (or their periodic reload).
  return print(`token key rotated: now signing with kid ${result.kid}; `
    + `the previous key ${result.previousKid} verifies the tokens it signed until ${result.previousUntil.toISOString()} (auth.refreshTokenTtl)`);
}

/** `gateway backup --out FILE`: embedded storage only; Postgres has pg_dump. */
export async function backupCommand({ config: configPath, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const out = typeof values.out === 'string' ? values.out : undefined;
  if (!out) throw new CommandError('--out FILE is required: where the backup goes');
  if (config.storage.postgres) throw new CommandError(POSTGRES_BACKUPS);
  const { backupEmbedded } = await import('../storage/database/index.js');
  const bytes = await backupEmbedded(config.storage.embeddedDir, out).catch(asCommandError);
  return print(`backed up ${config.storage.embeddedDir} to ${out} (${bytes} bytes)`);
}

/** `gateway restore FILE`: into an empty storage.embeddedDir. */
export async function restoreCommand({ config: configPath, operands }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  if (config.storage.postgres) throw new CommandError(POSTGRES_BACKUPS);
  const { restoreEmbedded } = await import('../storage/database/index.js');
  await restoreEmbedded(operands[0]!, config.storage.embeddedDir).catch(asCommandError);
  return print(`restored ${operands[0]} into ${config.storage.embeddedDir}`);
}

const POSTGRES_BACKUPS = 'storage.postgres is set: back it up with pg_dump and restore with pg_restore (docs/operating.md#backups)';
const asCommandError = (err: unknown): never => {
  throw new CommandError((err as Error).message);
};

/** `gateway keys revoke ID`: one API key, whoever holds it; through a running gateway with --admin. */
export async function revokeKeyCommand({ config: configPath, admin, operands: [idText] }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const id = /^[1-9]\d{0,15}$/.test(idText ?? '') ? Number(idText) : undefined;
  if (id === undefined) throw new CommandError(`expected a key id (GET /admin/v1/users/{id}/api-keys lists them), got ${JSON.stringify(idText ?? '')}`);
  if (admin) {
    const res = await callAdmin(admin, adminKeyFor(config), 'DELETE', `/admin/v1/api-keys/${id}`);
    if (res.status === 404) throw new CommandError(`no active API key with id ${id}`);
    if (res.status !== 200) throw new CommandError(`the admin API at ${admin} answered ${res.status}`);
    const userId = res.json.user_id as number;
    return print(`API key ${id} of user ${userId}: revoked`);
  }
  const [{ revokeKeyByCommand }, { recordChange }, { hookWriterOf }] = await Promise.all([import('../keys/index.js'), import('../audit.js'), import('../hooks/hooks.js')]);
  // Running instances drop the key within a second (the api_tokens trigger's NOTIFY).
  const revoked = await withDatabase(config, (db) => revokeKeyByCommand(db, id, (tx, key) =>
    recordChange(tx, { type: 'api_key.revoked', actor: 'cli', userId: key.userId, data: { id } }, new Date(), hookWriterOf(config, db))));
  if (!revoked) throw new CommandError(`no active API key with id ${id}`);
  return print(`API key ${id} of user ${revoked.userId}: revoked`);
}
