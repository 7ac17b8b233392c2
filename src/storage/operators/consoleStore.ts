// Where the console keeps its sessions and one-time sign-in tickets: by the SHA-256 of their
// secret, in memory. One process holds them: the instance itself, or with server.workers the
// primary (fleet/primary.ts), which every worker asks over the IPC channel, since node:cluster hands
// each new connection to any worker and a session known to one only would sign the operator out
// at the next connection.

export interface ConsoleEntry {
  /** Milliseconds since the epoch, by the clock of the instance that stored it. */
  expires: number;
  /** A session's CSRF token; none for a ticket. */
  csrf?: string;
  /** A digest of the shared admin key it was minted with (console.ts): a rotated key ends it. */
  key?: string;
  /** An operator's session (admin/operatorSignIn.ts): whose, and when its second factor was given (ms). */
  operator?: number;
  authTime?: number;
}

export interface ConsoleStore {
  get(key: string): Promise<ConsoleEntry | undefined>;
  put(key: string, entry: ConsoleEntry): Promise<void>;
  /** Removes and returns (a ticket's use, a sign-out): of two takers of one key, one gets it. */
  take(key: string): Promise<ConsoleEntry | undefined>;
}

export type ConsoleStoreCall = { op: 'get' | 'take'; key: string } | { op: 'put'; key: string; entry: ConsoleEntry };

/** The store in this process's memory; what has expired is forgotten as new entries come. */
export function memoryConsoleStore(now: () => number = Date.now): ConsoleStore & { call(c: ConsoleStoreCall): Promise<ConsoleEntry | undefined> } {
  const entries = new Map<string, ConsoleEntry>();
  const store = {
    get: async (key: string) => entries.get(key),
    put: async (key: string, entry: ConsoleEntry) => {
      const at = now();
      for (const [k, e] of entries) if (e.expires <= at) entries.delete(k);
      entries.set(key, entry);
    },
    take: async (key: string) => {
      const entry = entries.get(key);
      entries.delete(key);
      return entry;
    },
    /** One call as it arrives over IPC. */
    call: async (c: ConsoleStoreCall) => (c.op === 'put' ? void (await store.put(c.key, c.entry)) : store[c.op](c.key)),
  };
  return store;
}
