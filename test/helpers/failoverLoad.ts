// The load a failover test runs through the switch (CONTRACT §32): counted uses, refresh-token
// rotations, registrations (each one an operator hook, user.created), API keys created (each one a
// user webhook, api_token.created) on two instances, every answer recorded with its time and
// status. What the test then asserts: only the documented 503 besides the expected answers, none
// slower than storage.queryTimeout, every counted 200 counted once, no refresh token taken twice,
// every hook and webhook delivered. bench/failover.mjs prints the same figures.
import { setTimeout as sleep } from 'node:timers/promises';
import { bearer, marker, newEmail, newPassword, type TestGateway, type TestUser } from './gateway.js';

export interface Answer {
  kind: 'count' | 'refresh' | 'register' | 'apiKey';
  status: number;
  /** When it was sent, and how long it took (ms). */
  at: number;
  ms: number;
  body: string;
}

export interface FailoverLoad {
  answers: Answer[];
  /** Per counted user, the uses answered 200. */
  served: Map<number, number>;
  /** Every refresh token a rotation accepted (200), in order. */
  refreshAccepted: string[];
  /** Users registered (201) while loaded: each must reach the hook receiver as user.created. */
  registered: number[];
  /** API keys created (201): each must reach the user's webhook as api_token.created. */
  keysCreated: string[];
  stop(): Promise<void>;
}

export interface LoadParties {
  gateways: TestGateway[];
  /** Users on the counted route: each request counts one use. */
  counted: TestUser[];
  /** Users whose refresh tokens rotate. */
  rotating: TestUser[];
  /** A user with a webhook registered, who creates API keys. */
  keyMaker: TestUser;
  /** The counted route's prefix (`/count`). */
  route: string;
}

/** Starts the load; stop() ends it and resolves when every request in flight is answered. */
export function startFailoverLoad(p: LoadParties): FailoverLoad {
  const load: FailoverLoad = { answers: [], served: new Map(), refreshAccepted: [], registered: [], keysCreated: [], stop: async () => {} };
  let stopped = false;
  let n = 0;
  const gw = () => p.gateways[n++ % p.gateways.length]!;
  const timed = async (kind: Answer['kind'], send: () => Promise<{ status: number; text: string }>) => {
    const at = Date.now();
    const res = await send().catch((err: Error) => ({ status: 0, text: err.message }));
    load.answers.push({ kind, status: res.status, at, ms: Date.now() - at, body: res.text });
    return res;
  };
  const counting = async (user: TestUser) => {
    while (!stopped) {
      const res = await timed('count', () => gw().get(`${p.route}/${marker()}`, { headers: bearer(user.access) }));
      if (res.status === 200) load.served.set(user.id, (load.served.get(user.id) ?? 0) + 1);
      await sleep(2);
    }
  };
  const rotating = async (user: TestUser) => {
    let token = user.refresh;
    while (!stopped) {
      const res = await timed('refresh', () => gw().post('/api/v1/auth/refresh', { refresh_token: token })) as { status: number; text: string; json?: Record<string, string> };
      if (res.status === 200) {
        load.refreshAccepted.push(token);
        token = res.json!.refresh_token!;
      } else if (res.status === 401) {
        // A rotation whose answer was lost (503) may have taken the token: sign in again.
        const login = await gw().post('/api/v1/auth/login', { email: user.email, password: user.password });
        if (login.status === 200) token = login.json.refresh_token;
      }
      await sleep(20);
    }
  };
  const registering = async () => {
    while (!stopped) {
      const res = await timed('register', () => gw().post('/api/v1/auth/register', { email: newEmail('fo'), password: newPassword() })) as { status: number; text: string; json?: { user_id: number } };
      if (res.status === 201) load.registered.push(res.json!.user_id);
      await sleep(150);
    }
  };
  const makingKeys = async () => {
    while (!stopped) {
      const create = () => gw().post('/api/v1/user/api-keys', { name: `k${n}` }, { headers: bearer(p.keyMaker.access) });
      const res = await timed('apiKey', create) as { status: number; text: string; json?: { id: unknown } };
      if (res.status === 201) load.keysCreated.push(String(res.json!.id));
      await sleep(150);
    }
  };
  // Three requests at a time per counted user: a busy user, whose instance reserves blocks of
  // several uses (pipeline/guards/dailyLimit/blocks.ts) and holds some through the switch.
  const running = Promise.all([...p.counted.flatMap((u) => [counting(u), counting(u), counting(u)]), ...p.rotating.map(rotating), registering(), makingKeys()]);
  load.stop = async () => {
    stopped = true;
    await running;
  };
  return load;
}
