/** The docs' example pgbouncer.ini, made local to a run (see pgbouncerIni.mjs). */
export function localPgBouncerIni(postgresUrl: string, port: number, dir: string): string;
