// The WebSockets one listener holds open, and what ends them before their peers do (CONTRACT §10).
// A socket outlives the guards its upgrade passed: a user deactivated, moved to a plan the route
// does not allow, or whose API key is revoked would otherwise keep a live channel to the upstream
// for as long as the browser tab stays open. Every change to a user or a key, however it was made
// (admin API, CLI, SQL, another instance), reaches this instance on the change feed within a
// second; the socket's standing is then read again through the identity cache (which drops its
// entry on the same event, before this hears it) and, if the guard would refuse it now, the socket
// is closed with 1008 (policy violation) and the catalog's message. While the feed was down
// changes may have gone unheard, so every socket is read again when it resumes. A socket opened
// with a key that expires (CONTRACT §21: expires_at, or a roll's grace) is read again when it does:
// an expired key is refused like a revoked one, and no change is announced when the time comes.
import type { Logger } from 'pino';
import { ERRORS, type Denial } from '../errors/index.js';
import type { ChangeFeed, IdentityCache, MembershipCache } from '../storage/feed/index.js';
import { checkPlan } from '../pipeline/index.js';
import type { OrgRole } from '../storage/orgs/index.js';
import type { WebSocketStats } from '../telemetry/metrics.js';

/** Close code of RFC 6455 §7.4.1: the endpoint is going away (a server shutting down). */
export const GOING_AWAY = 1001;
/** Close code of RFC 6455 §7.4.1: a message (here, the socket's standing) violates policy. */
const POLICY_VIOLATION = 1008;
// How long closing peers get to answer a close at shutdown before their connections are cut.
const CLOSE_GRACE_MS = 2000;
// setTimeout holds at most 2^31 - 1 ms (24.8 days): a key expiring later is read again then, and re-armed.
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface OpenSocket {
  /** The route's path (logs). */
  readonly route: string;
  /** The route's plans, when it has a plan guard. */
  readonly plans: readonly string[] | undefined;
  /** The user it was opened as; undefined for an anonymous one (auth: optional or none). */
  readonly userId: number | undefined;
  /** The API key it was opened with, if that is how. */
  readonly keyHash: string | undefined;
  /**
   * The organization it acts for (CONTRACT §22): its id, the route's roles, and an organization
   * key's own role (the socket then acts with the weaker of it and its creator's).
   */
  readonly org?: { id: number; roles: readonly string[] | undefined; keyRole: OrgRole | undefined };
  close(code: number, reason?: string): void;
  /** Resolves once the socket is closed (both ends). */
  readonly closed: Promise<void>;
  terminate(): void;
}

export interface OpenSocketsDeps {
  feed: Pick<ChangeFeed, 'subscribe'>;
  identities: Pick<IdentityCache, 'activeUser' | 'key'>;
  /** With organizations enabled: who is a member, with which role (sockets acting for an organization). */
  memberships?: Pick<MembershipCache, 'membership'>;
  log: Logger;
  /** The gateway's clock, which the guards judge a key's expiry by. */
  clock: () => Date;
}

/** What /metrics reads: sockets opened since start and open now, by route. */
export class OpenSockets implements WebSocketStats {
  readonly opened = new Map<string, number>();
  private readonly all = new Set<OpenSocket>();
  private readonly byUser = new Map<number, Set<OpenSocket>>();
  /** The next reading of a socket whose key expires. */
  private readonly expiries = new Map<OpenSocket, NodeJS.Timeout>();
  private readonly unsubscribe: () => void;

  constructor(private readonly deps: OpenSocketsDeps) {
    this.unsubscribe = deps.feed.subscribe({
      userChanged: (id) => void this.recheck(id),
      apiKeyChanged: (hash) => void this.recheckKey(hash),
      truncated: () => void this.recheckAll(),
      orgChanged: (orgId) => void this.recheckOrg(orgId),
      resumed: () => void this.recheckAll(),
    });
  }

  get size(): number {
    return this.all.size;
  }

  /**
   * Holds `socket` until it closes, and reads its standing once now: a change heard while its
   * upgrade was being decided and connected (before it was held here) is not missed.
   */
  add(socket: OpenSocket): void {
    this.all.add(socket);
    this.opened.set(socket.route, (this.opened.get(socket.route) ?? 0) + 1);
    const openedAt = Date.now();
    this.deps.log.debug({ route: socket.route, userId: socket.userId }, 'websocket opened');
    if (socket.userId !== undefined) {
      let sockets = this.byUser.get(socket.userId);
      if (!sockets) this.byUser.set(socket.userId, (sockets = new Set()));
      sockets.add(socket);
      void this.recheck(socket.userId);
    }
    void socket.closed.then(() => {
      this.all.delete(socket);
      clearTimeout(this.expiries.get(socket));
      this.expiries.delete(socket);
      this.deps.log.debug({ route: socket.route, userId: socket.userId, durationMs: Date.now() - openedAt }, 'websocket closed');
      if (socket.userId === undefined) return;
      const sockets = this.byUser.get(socket.userId);
      sockets?.delete(socket);
      if (sockets?.size === 0) this.byUser.delete(socket.userId);
    });
  }

  openByRoute(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const { route } of this.all) counts.set(route, (counts.get(route) ?? 0) + 1);
    return counts;
  }

  /** Closes every socket with `code`; resolves when all are closed, cutting those that do not answer in time. */
  async closeAll(code = GOING_AWAY): Promise<void> {
    this.unsubscribe();
    for (const timer of this.expiries.values()) clearTimeout(timer);
    this.expiries.clear();
    const sockets = [...this.all];
    for (const socket of sockets) socket.close(code);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => { timer = setTimeout(resolve, CLOSE_GRACE_MS); });
    await Promise.race([Promise.all(sockets.map((s) => s.closed)), late]);
    clearTimeout(timer);
    for (const socket of this.all) socket.terminate();
  }

  private async recheckKey(hash: string): Promise<void> {
    const users = new Set([...this.all].filter((s) => s.keyHash === hash).map((s) => s.userId!));
    await Promise.all([...users].map((id) => this.recheck(id)));
  }

  /** The sockets acting for the organization (every organization: undefined), read again. */
  private async recheckOrg(orgId: number | undefined): Promise<void> {
    const users = new Set([...this.all].filter((s) => s.org && (orgId === undefined || s.org.id === orgId)).map((s) => s.userId!));
    await Promise.all([...users].map((id) => this.recheck(id)));
  }

  private async recheckAll(): Promise<void> {
    await Promise.all([...this.byUser.keys()].map((id) => this.recheck(id)));
  }

  /** Reads the standing of the user's sockets again; closes those the guards would refuse now. */
  private async recheck(userId: number): Promise<void> {
    const sockets = this.byUser.get(userId);
    if (!sockets) return;
    try {
      const user = await this.deps.identities.activeUser(userId);
      for (const socket of [...sockets]) {
        let denial: Denial | null = null;
        if (!user) denial = { code: 'userNotFound' };
        else if (socket.keyHash !== undefined) denial = await this.keyDenial(socket, socket.keyHash, userId);
        if (!denial && user) denial = socket.org ? await this.orgDenial(socket.org, userId, socket.plans) : socket.plans ? checkPlan(user.plan, socket.plans) : null;
        if (!denial) continue;
        this.deps.log.info({ route: socket.route, userId, reason: denial.code }, 'websocket closed: the user no longer passes the route\'s guards');
        socket.close(POLICY_VIOLATION, ERRORS[denial.code].fr);
      }
    } catch (err) {
      // Storage unreachable: the feed says so too, and its `resumed` brings a new reading.
      this.deps.log.warn({ err, userId }, 'websocket: could not read a user\'s standing again');
    }
  }

  /**
   * A socket acting for an organization, refused as the guards would refuse it now (CONTRACT §22):
   * no longer a member, a role the route's roles no longer take, an organization plan it does not allow.
   */
  private async orgDenial(org: NonNullable<OpenSocket['org']>, userId: number, plans: readonly string[] | undefined): Promise<Denial | null> {
    const membership = await this.deps.memberships?.membership(org.id, userId);
    if (!membership) return { code: org.keyRole ? 'tokenInvalid' : 'orgAccessDenied' };
    const order: readonly OrgRole[] = ['owner', 'admin', 'member'];
    const role = org.keyRole && order.indexOf(org.keyRole) > order.indexOf(membership.role) ? org.keyRole : membership.role;
    if (org.roles && !org.roles.includes(role)) return { code: 'roleInsufficient', extra: { required_roles: [...org.roles], current_role: role } };
    return plans ? checkPlan(membership.plan, plans) : null;
  }

  /** The socket's key refused as the guard would refuse it now (revoked, another's, expired); else its expiry awaited. */
  private async keyDenial(socket: OpenSocket, keyHash: string, userId: number): Promise<Denial | null> {
    const key = await this.deps.identities.key(keyHash);
    if (!key || key.userId !== userId) return { code: 'tokenInvalid' };
    if (key.expiresAt === null) return null;
    const left = key.expiresAt - this.deps.clock().getTime();
    if (left <= 0) return { code: 'tokenInvalid' };
    clearTimeout(this.expiries.get(socket));
    this.expiries.set(socket, setTimeout(() => void this.recheck(userId), Math.min(left + 1, MAX_TIMER_MS)).unref());
    return null;
  }
}
