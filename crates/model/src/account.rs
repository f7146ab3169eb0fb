//! People and their rights: users, teams, memberships, identities from OpenID Connect
//! providers, keys made at run time, entries of the audit log, and the rules that span them
//! (one user per email, the last admin, who may do what in which space). No I/O: the accounts
//! service holds a [`Directory`], asks it, and writes the records it answers with.
//!
//! Account records are few (people, teams, their keys), so a [`Directory`] holds all of them,
//! and the store keeps them under one version number: a change is checked against the
//! directory as of a version and written only if nobody wrote since, so that a rule spanning
//! records (the last admin, an email taken) holds across instances without locks.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::Millis;

/// What a key or a person may do: read, create and change links, or everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Editor,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "viewer" => Some(Role::Viewer),
            "editor" => Some(Role::Editor),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A user's place in the whole instance: an admin may do everything everywhere; a member only
/// what their teams grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserRole {
    Admin,
    Member,
}

impl UserRole {
    pub fn as_str(self) -> &'static str {
        match self {
            UserRole::Admin => "admin",
            UserRole::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<UserRole> {
        match s {
            "admin" => Some(UserRole::Admin),
            "member" => Some(UserRole::Member),
            _ => None,
        }
    }
}

/// A member's place in a team: the roles of keys, limited to the team's spaces (an owner also
/// manages the team's members and keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TeamRole {
    Viewer,
    Editor,
    Owner,
}

impl TeamRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TeamRole::Viewer => "viewer",
            TeamRole::Editor => "editor",
            TeamRole::Owner => "owner",
        }
    }

    pub fn parse(s: &str) -> Option<TeamRole> {
        match s {
            "viewer" => Some(TeamRole::Viewer),
            "editor" => Some(TeamRole::Editor),
            "owner" => Some(TeamRole::Owner),
            _ => None,
        }
    }

    /// The key role this team role grants in the team's spaces.
    pub fn rights(self) -> Role {
        match self {
            TeamRole::Viewer => Role::Viewer,
            TeamRole::Editor => Role::Editor,
            TeamRole::Owner => Role::Admin,
        }
    }
}

/// A person who signs in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub email: String,
    pub name: String,
    pub role: UserRole,
    pub disabled: bool,
    pub created_at: Millis,
    pub last_sign_in_at: Option<Millis>,
    /// The Argon2id PHC string; `None` for a user who signs in through a provider only.
    pub password: Option<String>,
    /// Sessions opened under an older epoch have ended (a password changed).
    pub session_epoch: u32,
    /// Keys made under an older epoch have ended (an admin reset the password).
    pub key_epoch: u32,
}

/// A team: its own space (the slug) and any more it was given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub slug: String,
    pub name: String,
    pub plan: Option<String>,
    /// Spaces beyond the slug's own.
    #[serde(default)]
    pub spaces: Vec<String>,
    pub created_at: Millis,
}

impl Team {
    /// Every space the team owns, its own first.
    pub fn all_spaces(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.slug.as_str()).chain(self.spaces.iter().map(String::as_str))
    }
}

/// A user's membership of a team.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub team: String,
    pub user_id: String,
    pub role: TeamRole,
}

/// A person as an OpenID Connect provider knows them, and the user they sign in as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    pub user_id: String,
    pub created_at: Millis,
}

/// Who made a key made at run time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "lowercase")]
pub enum Maker {
    /// A user, by id.
    User(String),
    /// A key of the configuration file, by its name.
    Config(String),
}

/// A key made at run time: `vsl_<id>_<secret>`; only the keyed hash of the secret is kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunKey {
    /// 12 characters, public (the key's prefix shows it).
    pub id: String,
    pub name: String,
    pub maker: Maker,
    /// The most it may do; the maker's rights cap it at every use.
    pub role: Role,
    /// Limited to this team's spaces.
    pub team: Option<String>,
    /// Hex HMAC-SHA256 of the secret under the store's key pepper.
    pub hash: String,
    pub created_at: Millis,
    pub expires_at: Option<Millis>,
    pub last_used_at: Option<Millis>,
    /// The maker's key epoch when made: a reset password ends it.
    pub epoch: u32,
}

/// One account record as the store keeps it: a kind, an id unique within it, and its body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AccountRecord {
    User(User),
    Team(Team),
    Member(Member),
    Identity(Identity),
    Key(RunKey),
}

impl AccountRecord {
    pub fn kind(&self) -> &'static str {
        match self {
            AccountRecord::User(_) => "user",
            AccountRecord::Team(_) => "team",
            AccountRecord::Member(_) => "member",
            AccountRecord::Identity(_) => "identity",
            AccountRecord::Key(_) => "key",
        }
    }

    /// The id within its kind (a member: team and user; an identity: issuer and subject).
    pub fn id(&self) -> String {
        match self {
            AccountRecord::User(u) => u.id.clone(),
            AccountRecord::Team(t) => t.slug.clone(),
            AccountRecord::Member(m) => member_id(&m.team, &m.user_id),
            AccountRecord::Identity(i) => identity_id(&i.issuer, &i.subject),
            AccountRecord::Key(k) => k.id.clone(),
        }
    }

    /// Its kind and id, which the store keys it by.
    pub fn address(&self) -> RecordAddress {
        RecordAddress {
            kind: self.kind().to_string(),
            id: self.id(),
        }
    }

    /// The bytes the store keeps (JSON: the export writes the same).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
}

/// Where an account record is kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordAddress {
    pub kind: String,
    pub id: String,
}

pub fn member_id(team: &str, user: &str) -> String {
    format!("{team}\u{1f}{user}")
}

pub fn identity_id(issuer: &str, subject: &str) -> String {
    format!("{issuer}\u{1f}{subject}")
}

/// Account records as of one version of the store.
#[derive(Clone, Debug, Default)]
pub struct AccountsSnapshot {
    pub version: u64,
    /// Each record's bytes ([`AccountRecord::encode`]).
    pub records: Vec<Vec<u8>>,
}

/// A change to account records, written whole or not at all.
#[derive(Clone, Debug, Default)]
pub struct AccountWrite {
    pub put: Vec<AccountRecord>,
    pub delete: Vec<RecordAddress>,
}

impl AccountWrite {
    pub fn put(record: AccountRecord) -> Self {
        Self {
            put: vec![record],
            delete: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.put.is_empty() && self.delete.is_empty()
    }
}

/// What one may do: everywhere with a role, or per space.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// A role in every space (an admin).
    pub everywhere: Option<Role>,
    /// Roles in named spaces, beyond `everywhere`.
    pub spaces: BTreeMap<String, Role>,
}

impl Grants {
    pub fn everywhere(role: Role) -> Self {
        Self {
            everywhere: Some(role),
            spaces: BTreeMap::new(),
        }
    }

    /// The role in `space`, if any.
    pub fn role_in(&self, space: &str) -> Option<Role> {
        let named = self.spaces.get(space).copied();
        match (self.everywhere, named) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The highest role anywhere.
    pub fn highest(&self) -> Option<Role> {
        self.spaces.values().copied().chain(self.everywhere).max()
    }

    /// At most `role`, and (with `limit`) only in those spaces.
    pub fn capped(&self, role: Role, limit: Option<&[String]>) -> Grants {
        match limit {
            None => Grants {
                everywhere: self.everywhere.map(|r| r.min(role)),
                spaces: self
                    .spaces
                    .iter()
                    .map(|(s, r)| (s.clone(), (*r).min(role)))
                    .collect(),
            },
            Some(spaces) => Grants {
                everywhere: None,
                spaces: spaces
                    .iter()
                    .filter_map(|s| self.role_in(s).map(|r| (s.clone(), r.min(role))))
                    .collect(),
            },
        }
    }
}

/// Every account record, indexed for the questions the services ask.
#[derive(Clone, Debug, Default)]
pub struct Directory {
    pub version: u64,
    users: BTreeMap<String, User>,
    by_email: HashMap<String, String>,
    teams: BTreeMap<String, Team>,
    /// Team → user → role.
    members: BTreeMap<String, BTreeMap<String, TeamRole>>,
    identities: HashMap<(String, String), Identity>,
    keys: BTreeMap<String, RunKey>,
    /// Space → the team that owns it.
    space_owner: HashMap<String, String>,
}

/// Emails are compared without case.
pub fn email_key(email: &str) -> String {
    email.trim().to_lowercase()
}

impl Directory {
    /// The directory of a snapshot; a record that does not decode is reported, not dropped
    /// silently (the caller logs it and `check` finds it).
    pub fn load(snapshot: &AccountsSnapshot) -> (Self, Vec<String>) {
        let mut dir = Directory {
            version: snapshot.version,
            ..Directory::default()
        };
        let mut faults = Vec::new();
        for bytes in &snapshot.records {
            match AccountRecord::decode(bytes) {
                Ok(record) => dir.insert(record),
                Err(e) => faults.push(e),
            }
        }
        (dir, faults)
    }

    /// The directory after `write` (what a write will make of it).
    pub fn with(&self, write: &AccountWrite) -> Directory {
        let mut next = self.clone();
        for address in &write.delete {
            next.remove(address);
        }
        for record in &write.put {
            next.remove(&record.address());
            next.insert(record.clone());
        }
        next
    }

    fn insert(&mut self, record: AccountRecord) {
        match record {
            AccountRecord::User(u) => {
                self.by_email.insert(email_key(&u.email), u.id.clone());
                self.users.insert(u.id.clone(), u);
            }
            AccountRecord::Team(t) => {
                for space in t.all_spaces() {
                    self.space_owner.insert(space.to_string(), t.slug.clone());
                }
                self.teams.insert(t.slug.clone(), t);
            }
            AccountRecord::Member(m) => {
                self.members
                    .entry(m.team)
                    .or_default()
                    .insert(m.user_id, m.role);
            }
            AccountRecord::Identity(i) => {
                self.identities
                    .insert((i.issuer.clone(), i.subject.clone()), i);
            }
            AccountRecord::Key(k) => {
                self.keys.insert(k.id.clone(), k);
            }
        }
    }

    fn remove(&mut self, address: &RecordAddress) {
        match address.kind.as_str() {
            "user" => {
                if let Some(u) = self.users.remove(&address.id) {
                    self.by_email.remove(&email_key(&u.email));
                }
            }
            "team" => {
                if let Some(t) = self.teams.remove(&address.id) {
                    for space in t.all_spaces() {
                        self.space_owner.remove(space);
                    }
                }
            }
            "member" => {
                if let Some((team, user)) = address.id.split_once('\u{1f}') {
                    if let Some(members) = self.members.get_mut(team) {
                        members.remove(user);
                    }
                }
            }
            "identity" => {
                if let Some((issuer, subject)) = address.id.split_once('\u{1f}') {
                    self.identities
                        .remove(&(issuer.to_string(), subject.to_string()));
                }
            }
            "key" => {
                self.keys.remove(&address.id);
            }
            _ => {}
        }
    }

    /// Every record (for exports).
    pub fn records(&self) -> Vec<AccountRecord> {
        let mut out: Vec<AccountRecord> = Vec::new();
        out.extend(self.users.values().cloned().map(AccountRecord::User));
        out.extend(self.teams.values().cloned().map(AccountRecord::Team));
        for (team, members) in &self.members {
            out.extend(members.iter().map(|(user, role)| {
                AccountRecord::Member(Member {
                    team: team.clone(),
                    user_id: user.clone(),
                    role: *role,
                })
            }));
        }
        out.extend(
            self.identities
                .values()
                .cloned()
                .map(AccountRecord::Identity),
        );
        out.extend(self.keys.values().cloned().map(AccountRecord::Key));
        out
    }

    pub fn user(&self, id: &str) -> Option<&User> {
        self.users.get(id)
    }

    pub fn user_by_email(&self, email: &str) -> Option<&User> {
        self.by_email
            .get(&email_key(email))
            .and_then(|id| self.users.get(id))
    }

    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    pub fn team(&self, slug: &str) -> Option<&Team> {
        self.teams.get(slug)
    }

    pub fn teams(&self) -> impl Iterator<Item = &Team> {
        self.teams.values()
    }

    /// The team that owns `space`, if one does.
    pub fn space_owner(&self, space: &str) -> Option<&str> {
        self.space_owner.get(space).map(String::as_str)
    }

    /// A team's members and their roles.
    pub fn members(&self, team: &str) -> impl Iterator<Item = (&str, TeamRole)> {
        self.members
            .get(team)
            .into_iter()
            .flat_map(|m| m.iter().map(|(u, r)| (u.as_str(), *r)))
    }

    pub fn member_role(&self, team: &str, user: &str) -> Option<TeamRole> {
        self.members.get(team).and_then(|m| m.get(user)).copied()
    }

    /// The teams a user belongs to, with their role in each.
    pub fn teams_of(&self, user: &str) -> Vec<(&Team, TeamRole)> {
        self.members
            .iter()
            .filter_map(|(team, members)| {
                let role = members.get(user)?;
                Some((self.teams.get(team)?, *role))
            })
            .collect()
    }

    pub fn identity(&self, issuer: &str, subject: &str) -> Option<&Identity> {
        self.identities
            .get(&(issuer.to_string(), subject.to_string()))
    }

    pub fn identities_of(&self, user: &str) -> impl Iterator<Item = &Identity> {
        let user = user.to_string();
        self.identities.values().filter(move |i| i.user_id == user)
    }

    pub fn key(&self, id: &str) -> Option<&RunKey> {
        self.keys.get(id)
    }

    pub fn keys(&self) -> impl Iterator<Item = &RunKey> {
        self.keys.values()
    }

    /// Enabled admins.
    pub fn enabled_admins(&self) -> usize {
        self.users
            .values()
            .filter(|u| u.role == UserRole::Admin && !u.disabled)
            .count()
    }

    /// What a user may do now: everything for an enabled admin, their teams' roles in their
    /// teams' spaces for a member, nothing for a disabled user.
    pub fn grants(&self, user: &User) -> Grants {
        if user.disabled {
            return Grants::default();
        }
        if user.role == UserRole::Admin {
            return Grants::everywhere(Role::Admin);
        }
        let mut grants = Grants::default();
        for (team, role) in self.teams_of(&user.id) {
            for space in team.all_spaces() {
                let entry = grants
                    .spaces
                    .entry(space.to_string())
                    .or_insert(Role::Viewer);
                *entry = (*entry).max(role.rights());
            }
        }
        grants
    }

    /// The spaces of a team, when it exists.
    pub fn team_spaces(&self, team: &str) -> Option<Vec<String>> {
        self.teams
            .get(team)
            .map(|t| t.all_spaces().map(str::to_string).collect())
    }

    /// Refuses a write that would leave no enabled admin while one exists now.
    pub fn keeps_an_admin(&self, after: &Directory) -> bool {
        self.enabled_admins() == 0 || after.enabled_admins() > 0
    }
}

/// An entry of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Assigned by the store, increasing.
    #[serde(default)]
    pub id: u64,
    pub at: Millis,
    /// Who: `user:<id>`, `key:<id>`, `config:<name>`, or the email tried for a failed sign-in.
    pub actor: String,
    pub action: String,
    pub target: String,
    pub ip: String,
    /// The team whose record it is, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Creates folded into one entry (`link.created`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// Which audit entries to list, newest first.
#[derive(Clone, Debug, Default)]
pub struct AuditQuery {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub team: Option<String>,
    pub from: Option<Millis>,
    pub to: Option<Millis>,
    /// Entries with an id below this one (the previous page's cursor).
    pub before: Option<u64>,
    pub limit: usize,
}

impl AuditQuery {
    pub fn matches(&self, e: &AuditEntry) -> bool {
        self.actor.as_ref().is_none_or(|a| *a == e.actor)
            && self.action.as_ref().is_none_or(|a| *a == e.action)
            && self
                .team
                .as_ref()
                .is_none_or(|t| e.team.as_ref() == Some(t))
            && self.from.is_none_or(|f| e.at >= f)
            && self.to.is_none_or(|t| e.at < t)
            && self.before.is_none_or(|b| e.id < b)
    }
}

/// One page of the audit log, and the cursor of the next.
#[derive(Clone, Debug, Default)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub next: Option<u64>,
}

/// Longest team slug (a team's slug is its space's name).
pub const MAX_TEAM_LEN: usize = 64;

/// A `team_groups` value, `team:role`; the reason when it is not one.
pub fn parse_team_grant(value: &str) -> Result<(String, TeamRole), String> {
    let Some((team, role)) = value.split_once(':') else {
        return Err(format!("`{value}` is not `team:role`"));
    };
    let team_ok = !team.is_empty()
        && team.len() <= MAX_TEAM_LEN
        && team
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !team_ok {
        return Err(format!(
            "`{team}` is not a team: 1 to {MAX_TEAM_LEN} letters, digits, `_`, `-` and `.`"
        ));
    }
    let role = TeamRole::parse(role)
        .ok_or_else(|| format!("`{role}` is not a team role: owner, editor or viewer"))?;
    Ok((team.to_string(), role))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str, email: &str, role: UserRole) -> User {
        User {
            id: id.into(),
            email: email.into(),
            name: String::new(),
            role,
            disabled: false,
            created_at: 0,
            last_sign_in_at: None,
            password: None,
            session_epoch: 0,
            key_epoch: 0,
        }
    }

    #[test]
    fn members_get_their_teams_roles_in_their_teams_spaces() {
        let dir = Directory::default().with(&AccountWrite {
            put: vec![
                AccountRecord::User(user("a", "A@x.org", UserRole::Member)),
                AccountRecord::Team(Team {
                    slug: "red".into(),
                    name: "Red".into(),
                    plan: None,
                    spaces: vec!["red-2".into()],
                    created_at: 0,
                }),
                AccountRecord::Member(Member {
                    team: "red".into(),
                    user_id: "a".into(),
                    role: TeamRole::Editor,
                }),
            ],
            delete: vec![],
        });
        let a = dir.user_by_email("a@X.org").expect("case-insensitive");
        let grants = dir.grants(a);
        assert_eq!(grants.role_in("red"), Some(Role::Editor));
        assert_eq!(grants.role_in("red-2"), Some(Role::Editor));
        assert_eq!(grants.role_in("blue"), None);
        assert_eq!(dir.space_owner("red-2"), Some("red"));
        let capped = grants.capped(Role::Viewer, None);
        assert_eq!(capped.role_in("red"), Some(Role::Viewer));
    }

    #[test]
    fn the_last_admin_stays() {
        let dir = Directory::default().with(&AccountWrite::put(AccountRecord::User(user(
            "a",
            "a@x",
            UserRole::Admin,
        ))));
        let mut demoted = user("a", "a@x", UserRole::Member);
        let after = dir.with(&AccountWrite::put(AccountRecord::User(demoted.clone())));
        assert!(!dir.keeps_an_admin(&after));
        demoted.role = UserRole::Admin;
        demoted.disabled = true;
        let after = dir.with(&AccountWrite::put(AccountRecord::User(demoted)));
        assert!(!dir.keeps_an_admin(&after));
    }

    #[test]
    fn records_round_trip() {
        let record = AccountRecord::Key(RunKey {
            id: "abcdefghijkl".into(),
            name: "ci".into(),
            maker: Maker::Config("admin".into()),
            role: Role::Editor,
            team: None,
            hash: "00".into(),
            created_at: 1,
            expires_at: None,
            last_used_at: None,
            epoch: 0,
        });
        assert_eq!(AccountRecord::decode(&record.encode()), Ok(record));
    }
}
