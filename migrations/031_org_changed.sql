-- Acting for an organization (CONTRACT §22): every instance keeps who belongs to which
-- organization, with which role, and the organization's plan, in memory (storage/membershipCache.ts),
-- so a request naming Gateway-Org costs no query. A membership added, changed or removed, or an
-- organization's plan changed or the organization deleted, however it was made (the endpoints, an
-- operator, SQL by hand), is announced on gw_org_changed with the organization's id; a TRUNCATE
-- with '*'. Every instance then forgets that organization, and closes the WebSockets acting for it
-- that no longer pass (proxy/openSockets.ts): within the one second of CONTRACT §22.
-- Expand-only: functions and triggers; nothing the previous release reads changes.
CREATE FUNCTION gw_notify_org_changed() RETURNS trigger AS $$
BEGIN
  IF TG_TABLE_NAME = 'organizations' THEN
    PERFORM pg_notify('gw_org_changed', OLD.id::text);
  ELSE
    IF TG_OP <> 'INSERT' THEN
      PERFORM pg_notify('gw_org_changed', OLD.org_id::text);
    END IF;
    IF TG_OP <> 'DELETE' THEN
      PERFORM pg_notify('gw_org_changed', NEW.org_id::text);
    END IF;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER memberships_changed AFTER INSERT OR UPDATE OR DELETE ON memberships FOR EACH ROW
  EXECUTE FUNCTION gw_notify_org_changed();
CREATE TRIGGER organizations_plan_changed AFTER UPDATE ON organizations FOR EACH ROW
  WHEN (NEW.plan IS DISTINCT FROM OLD.plan OR NEW.id IS DISTINCT FROM OLD.id)
  EXECUTE FUNCTION gw_notify_org_changed();
CREATE TRIGGER organizations_deleted AFTER DELETE ON organizations FOR EACH ROW
  EXECUTE FUNCTION gw_notify_org_changed();

CREATE FUNCTION gw_notify_orgs_truncated() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_org_changed', '*');
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER memberships_truncated AFTER TRUNCATE ON memberships
  FOR EACH STATEMENT EXECUTE FUNCTION gw_notify_orgs_truncated();
CREATE TRIGGER organizations_truncated AFTER TRUNCATE ON organizations
  FOR EACH STATEMENT EXECUTE FUNCTION gw_notify_orgs_truncated();
