// Organizations, the account side (CONTRACT §22), on docs/organizations.md's configuration as it is
// written: the whole way of an organization (create, invite by mail, accept, roles, the last owner,
// leave, delete) and what its audit log says, as a client and a mailbox see them.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from './helpers.js';

describeWithServices('organizations: the whole way', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(organizationsConfig(smtp));
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  const as = (user: TestUser) => ({ headers: bearer(user.access) });

  it('create, invite by mail, accept, roles, the last owner, leave, delete; every step audited', async () => {
    const [alice, bob, carol] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const created = await gw.post('/api/v1/orgs', { name: 'Acme <b>&</b> Co' }, as(alice));
    expect(created.status, created.text).toBe(201);
    const id = created.json.id as number;
    expect(created.json).toEqual({ id, name: 'Acme <b>&</b> Co', plan: 'free', role: 'owner', created_at: expect.any(String) });
    expect((await gw.get('/api/v1/orgs', as(alice))).json).toEqual({ orgs: [{ id, name: 'Acme <b>&</b> Co', plan: 'free', role: 'owner' }] });

    // Alice invites Bob as admin: a mail with a single-use link to the application's page.
    const invited = await gw.post(`/api/v1/orgs/${id}/invitations`, { email: bob.email.toUpperCase(), role: 'admin' }, as(alice));
    expect(invited.status, invited.text).toBe(201);
    expect(invited.json).toEqual({ id: expect.any(Number), email: bob.email, role: 'admin', expires_at: expect.any(String) });
    const days = (Date.parse(invited.json.expires_at) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.99);
    expect(days).toBeLessThan(7.01);
    const mail = await smtp.waitFor(bob.email, 2);
    expect(mail.subject).toBe('Invitation à rejoindre une organisation');
    expect(mail.text).toContain(`${alice.email} vous invite à rejoindre l’organisation « Acme <b>&</b> Co »`);
    expect(mail.link).toMatch(/^https:\/\/app\.example\.com\/join\?token=[A-Za-z0-9_-]{43}$/);
    expect(mail.html).toBe(false);
    // Only the hash is stored.
    expect(await sql('SELECT 1 FROM org_invitations WHERE token_hash = $1', [mail.token])).toEqual([]);
    expect((await gw.get(`/api/v1/orgs/${id}/invitations`, as(alice))).json).toEqual({ invitations: [invited.json] });

    const accepted = await gw.post('/api/v1/orgs/invitations/accept', { token: mail.token }, as(bob));
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.json).toEqual({ org_id: id, user_id: bob.id, role: 'admin', joined_at: expect.any(String) });
    // Once.
    expect((await gw.post('/api/v1/orgs/invitations/accept', { token: mail.token }, as(bob))).json).toMatchObject({ error: 'Lien invalide ou expiré', code: 'link_invalid' });
    expect((await gw.get(`/api/v1/orgs/${id}/invitations`, as(alice))).json).toEqual({ invitations: [] });

    // Bob, an admin, invites Carol as a member; she sees the organization, not its members.
    expect(await join(gw, carol, await invite(gw, smtp, id, bob, carol, 'member'))).toBe(200);
    const seenByCarol = await gw.get(`/api/v1/orgs/${id}`, as(carol));
    expect(seenByCarol.json).toEqual({ id, name: 'Acme <b>&</b> Co', plan: 'free', created_at: created.json.created_at });
    const seenByBob = await gw.get(`/api/v1/orgs/${id}`, as(bob));
    expect(seenByBob.json.members).toEqual([
      { user_id: alice.id, email: alice.email, role: 'owner', joined_at: expect.any(String) },
      { user_id: bob.id, email: bob.email, role: 'admin', joined_at: expect.any(String) },
      { user_id: carol.id, email: carol.email, role: 'member', joined_at: expect.any(String) },
    ]);
    expect((await gw.get('/api/v1/orgs', as(carol))).json.orgs).toEqual([{ id, name: 'Acme <b>&</b> Co', plan: 'free', role: 'member' }]);

    // Roles: Carol may not rename; Bob may; Bob may not make anyone owner; Alice may.
    expect(await gw.request('PATCH', `/api/v1/orgs/${id}`, { ...as(carol), json: { name: 'Mine' } })).toMatchObject({
      status: 403, json: { error: 'Rôle insuffisant', code: 'role_insufficient', required_roles: ['owner', 'admin'], current_role: 'member' },
    });
    const renamed = await gw.request('PATCH', `/api/v1/orgs/${id}`, { ...as(bob), json: { name: 'Acme' } });
    expect([renamed.status, renamed.json]).toEqual([200, { id, name: 'Acme', plan: 'free', created_at: created.json.created_at }]);
    expect(await gw.request('PUT', `/api/v1/orgs/${id}/members/${carol.id}`, { ...as(bob), json: { role: 'owner' } })).toMatchObject({
      status: 403, json: { error: 'Rôle insuffisant', required_roles: ['owner'], current_role: 'admin' },
    });
    // Below owner, an admin sets roles; a role set to what it is already changes nothing and records nothing,
    // the sole owner's "owner" included.
    for (const role of ['admin', 'admin', 'member']) {
      const res = await gw.request('PUT', `/api/v1/orgs/${id}/members/${carol.id}`, { ...as(bob), json: { role } });
      expect([res.status, res.json], role).toEqual([200, { user_id: carol.id, email: carol.email, role, joined_at: expect.any(String) }]);
    }
    expect((await gw.request('PUT', `/api/v1/orgs/${id}/members/${alice.id}`, { ...as(alice), json: { role: 'owner' } })).json).toMatchObject({ role: 'owner' });
    const promoted = await gw.request('PUT', `/api/v1/orgs/${id}/members/${bob.id}`, { ...as(alice), json: { role: 'owner' } });
    expect([promoted.status, promoted.json]).toEqual([200, { user_id: bob.id, email: bob.email, role: 'owner', joined_at: expect.any(String) }]);

    // Alice steps down; Bob, now the last owner, can neither step down nor leave.
    expect((await gw.request('PUT', `/api/v1/orgs/${id}/members/${alice.id}`, { ...as(alice), json: { role: 'member' } })).status).toBe(200);
    const lastOwner = { status: 409, json: { error: 'Dernier propriétaire de l\'organisation', code: 'last_owner' } };
    expect(await gw.request('PUT', `/api/v1/orgs/${id}/members/${bob.id}`, { ...as(bob), json: { role: 'admin' } })).toMatchObject(lastOwner);
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}/members/${bob.id}`, as(bob))).toMatchObject(lastOwner);

    // Carol leaves; Bob removes Alice; the organization is gone for them.
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}/members/${carol.id}`, as(carol))).toMatchObject({ status: 200, json: { message: 'Membre retiré' } });
    expect((await gw.request('DELETE', `/api/v1/orgs/${id}/members/${alice.id}`, as(bob))).status).toBe(200);
    for (const gone of [alice, carol]) {
      expect(await gw.get(`/api/v1/orgs/${id}`, as(gone))).toMatchObject({ status: 404, json: { error: 'Organisation introuvable', code: 'org_not_found' } });
    }

    // Bob deletes it (a recent sign-in: guard factor).
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}`, as(bob))).toMatchObject({ status: 200, json: { message: 'Organisation supprimée' } });
    expect((await gw.get(`/api/v1/orgs/${id}`, as(bob))).status).toBe(404);
    expect((await gw.get('/api/v1/orgs', as(bob))).json).toEqual({ orgs: [] });
    expect(await sql('SELECT 1 FROM memberships WHERE org_id = $1 UNION ALL SELECT 1 FROM org_invitations WHERE org_id = $1', [id])).toEqual([]);

    const events = await sql<{ type: string; user_id: number; data: Record<string, unknown> }>(
      "SELECT type, user_id, data FROM audit_events WHERE type LIKE 'org.%' AND data->>'org_id' = $1 ORDER BY id", [String(id)],
    );
    expect(events.map((e) => [e.type, e.user_id, e.data.member_id])).toEqual([
      ['org.created', alice.id, undefined],
      ['org.invitation_sent', alice.id, undefined],
      ['org.member_added', bob.id, bob.id],
      ['org.invitation_sent', bob.id, undefined],
      ['org.member_added', carol.id, carol.id],
      ['org.updated', bob.id, undefined],
      ['org.role_changed', bob.id, carol.id],
      ['org.role_changed', bob.id, carol.id],
      ['org.role_changed', alice.id, bob.id],
      ['org.role_changed', alice.id, alice.id],
      ['org.member_removed', carol.id, carol.id],
      ['org.member_removed', bob.id, alice.id],
      ['org.deleted', bob.id, undefined],
    ]);
    expect(events.map((e) => JSON.stringify(e.data)).join()).not.toContain(mail.token);
  });

  it('an invitation is cancelled by an owner or admin: its link no longer works, and it cannot be cancelled twice', async () => {
    const [owner, guest] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const id = await createOrg(gw, owner);
    const token = await invite(gw, smtp, id, owner, guest, 'member');
    const [pending] = (await gw.get(`/api/v1/orgs/${id}/invitations`, as(owner))).json.invitations as Array<{ id: number }>;
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}/invitations/${pending!.id}`, as(owner))).toMatchObject({ status: 200, json: { message: 'Invitation annulée' } });
    expect(await gw.post('/api/v1/orgs/invitations/accept', { token }, as(guest))).toMatchObject({ status: 400, json: { error: 'Lien invalide ou expiré' } });
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}/invitations/${pending!.id}`, as(owner))).toMatchObject({
      status: 404, json: { error: 'Invitation introuvable', code: 'invitation_not_found' },
    });
    const types = await sql<{ type: string }>("SELECT type FROM audit_events WHERE data->>'org_id' = $1 ORDER BY id", [String(id)]);
    expect(types.map((t) => t.type)).toContain('org.invitation_cancelled');
  });

  it('a new invitation to the same address replaces the pending one; the mail follows the invited account\'s language', async () => {
    const [owner, guest] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    expect((await gw.request('PATCH', '/api/v1/user/me', { ...as(guest), json: { locale: 'en' } })).status).toBe(200);
    const id = await createOrg(gw, owner, 'Globex');
    const first = await invite(gw, smtp, id, owner, guest, 'member', 2);
    const second = await invite(gw, smtp, id, owner, guest, 'admin', 3);
    const mail = await smtp.waitFor(guest.email, 3);
    expect(mail.subject).toBe('Invitation to join an organization');
    expect(mail.text).toContain(`${owner.email} invites you to join the organization “Globex”`);
    expect((await gw.get(`/api/v1/orgs/${id}/invitations`, as(owner))).json.invitations).toEqual([expect.objectContaining({ role: 'admin' })]);
    expect(await join(gw, guest, first)).toBe(400);
    const joined = await gw.post('/api/v1/orgs/invitations/accept', { token: second }, as(guest));
    expect(joined.json.role).toBe('admin');
  });
});
