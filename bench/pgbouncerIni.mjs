// The docs' example pgbouncer.ini (docs/examples/pgbouncer.ini) made local: its database line
// pointed at `postgresUrl`'s database, its port, log and pid file moved to `port` and `dir`, and
// authentication left to the run's Postgres, which trusts local connections. The PgBouncer tests
// (test/helpers/pgbouncer.ts) and the bench's PgBouncer scenario run exactly this.
import { readFileSync } from 'node:fs';

const EXAMPLE = new URL('../docs/examples/pgbouncer.ini', import.meta.url);

export function localPgBouncerIni(postgresUrl, port, dir) {
  const direct = new URL(postgresUrl);
  const database = direct.pathname.slice(1);
  return readFileSync(EXAMPLE, 'utf8')
    .replace(/^gateway = .*$/m, `${database} = host=${direct.hostname} port=${direct.port || 5432} dbname=${database} user=${direct.username || 'root'}`)
    .replace(/^listen_port = .*$/m, `listen_port = ${port}`)
    .replace(/^auth_type = .*$/m, 'auth_type = any')
    .replace(/^auth_file = .*\n/m, '')
    .replace(/^logfile = .*$/m, `logfile = ${dir}/pgbouncer.log`)
    .replace(/^pidfile = .*$/m, `pidfile = ${dir}/pgbouncer.pid\nunix_socket_dir =`);
}
