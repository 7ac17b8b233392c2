-- SCIM 2.0 provisioning (CONTRACT §31): an organization's directory (Okta, Entra ID) adds, changes
-- and removes its people through tokens that belong to the organization, not to whoever made them.
-- Expand-only: new tables, which the previous release neither reads nor writes. (The audit actor
-- `scim` is 043's, with the managed accounts that tell which accounts the organization created.)

-- A token is shown once and kept as its SHA-256; it goes with its organization (CASCADE) and
-- outlives its creator's membership (created_by only says who, SET NULL when the account goes).
CREATE TABLE scim_tokens (
  id serial PRIMARY KEY,
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  token_hash text NOT NULL UNIQUE,
  created_by integer REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  last_used_at timestamptz
);
CREATE INDEX scim_tokens_org ON scim_tokens (org_id);

-- The directory's user, kept while its membership is removed (active false) and gone with DELETE.
-- One per account and organization; user_name is the directory's userName as the account's email
-- is stored (lower-case), unique within the organization. deactivated_account: this SCIM user's
-- deprovisioning deactivated the account (a managed account in no other organization), so that
-- `active: true` gives back exactly what it took.
CREATE TABLE scim_users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  user_name text NOT NULL,
  external_id text,
  name jsonb NOT NULL DEFAULT '{}',
  display_name text,
  emails jsonb NOT NULL DEFAULT '[]',
  active boolean NOT NULL DEFAULT true,
  deactivated_account boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (org_id, user_id),
  UNIQUE (org_id, user_name)
);
CREATE INDEX scim_users_external ON scim_users (org_id, external_id);

-- The directory's groups: their display names are what roleMapping maps to roles (§31 "Roles").
CREATE TABLE scim_groups (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  display_name text NOT NULL,
  external_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX scim_groups_name ON scim_groups (org_id, lower(display_name));

CREATE TABLE scim_group_members (
  group_id uuid NOT NULL REFERENCES scim_groups (id) ON DELETE CASCADE,
  scim_user_id uuid NOT NULL REFERENCES scim_users (id) ON DELETE CASCADE,
  PRIMARY KEY (group_id, scim_user_id)
);
CREATE INDEX scim_group_members_user ON scim_group_members (scim_user_id);
