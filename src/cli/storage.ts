// `gateway migrate` and `gateway keys rotate`: the commands that change the database's shape or keys.
import { loadConfig } from '../config/load.js';
import { CommandError, print, withDatabase, type Args } from './command.js';

export async function migrateCommand({ config: configPath }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const [{ migrate }, { waitForPostgres }] = await Promise.all([import('../storage/migrations.js'), import('../storage/startWait.js')]);
  // A migration Job starts beside its Postgres as the gateway does: it waits the same way (stdout keeps the result alone).
  if (config.storage.postgres) await waitForPostgres(config.storage.postgres, config.storage.startTimeout, { warn: (_fields, msg) => console.error(`gateway: ${msg}`) });
  const applied = await withDatabase(config, (db) => migrate(db), { migrated: false });
  return print(applied.length ? `applied: ${applied.join(', ')}` : 'nothing to apply');
}

export async function rotateKeys({ config: configPath, admin }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  if (admin) throw new CommandError('the admin API does not rotate keys: run `gateway keys rotate` where it can open the database (on Postgres, anywhere; on embedded storage, with the gateway stopped)');
  const [{ rotateAssertionKeys }, { RETIRED_KEY_PUBLISHED_MS }] = await Promise.all([import('../credentials/assertionKeys.js'), import('../credentials/assertionKeyring.js')]);
  const { current, previous, next } = await withDatabase(config, (db) => rotateAssertionKeys(db));
  // Running instances pick the rotation up through NOTIFY (or their periodic reload).
  return print(`assertion key rotated: now signing with kid ${current}` + (previous ? `; ${previous} stays published for ${RETIRED_KEY_PUBLISHED_MS / 1000} s` : '') + `; next kid ${next} is published ahead`);
}
