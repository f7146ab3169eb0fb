//! Users and teams: making, changing and removing them, and a team's members. Who may: admins
//! manage users and teams; a team's owners (whoever holds the admin role in the team's space)
//! manage its members and rename it. Every rule is checked against the directory the write is
//! made from ([`Accounts::change`]); the last enabled admin is kept there for every write.

use std::net::IpAddr;

use super::{random_text, AccountError, Accounts, Result, ID_ALPHABET};
use crate::keys::Principal;
use crate::model::account::{email_key, member_id, RecordAddress};
use crate::model::{
    AccountRecord, AccountWrite, Directory, Member, Role, Team, TeamRole, User, UserRole,
};

/// Shortest password a person may choose.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest (Argon2 takes any length; a bound keeps a request's work bounded).
pub const MAX_PASSWORD_CHARS: usize = 256;
const MAX_EMAIL_LEN: usize = 254;
const MAX_NAME_CHARS: usize = 100;
/// Longest team slug and space name (a space's own limit).
const MAX_SLUG_LEN: usize = 64;

/// `POST /api/v1/users`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    pub email: String,
    pub name: Option<String>,
    pub password: Option<String>,
    pub role: Option<String>,
}

/// `PATCH /api/v1/users/{id}`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserPatch {
    pub name: Option<String>,
    pub role: Option<String>,
    pub disabled: Option<bool>,
    pub password: Option<String>,
}

/// `POST /api/v1/teams`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTeam {
    pub slug: String,
    pub name: Option<String>,
    pub plan: Option<String>,
    #[serde(default)]
    pub spaces: Vec<String>,
}

/// `PATCH /api/v1/teams/{slug}`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamPatch {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "crate::accounts::people::nullable")]
    pub plan: Option<Option<String>>,
    pub spaces: Option<Vec<String>>,
}

/// A field that may be absent (leave it), `null` (clear it) or a value.
pub fn nullable<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(d).map(Some)
}

/// Who makes a change, and from where (for the audit log).
pub struct Acting<'a> {
    pub by: &'a Principal,
    pub ip: IpAddr,
}

impl Acting<'_> {
    fn admin(&self) -> Result<()> {
        if self.by.everywhere() {
            Ok(())
        } else {
            Err(AccountError::forbidden(format!(
                "`{}` is not an admin of this instance",
                self.by.name
            )))
        }
    }

    /// Admins, and owners of `team` (the admin role in its space).
    fn owner_of(&self, team: &str) -> Result<()> {
        if self.by.role_in(team) == Some(Role::Admin) {
            Ok(())
        } else {
            Err(AccountError::forbidden(format!(
                "`{}` is not an owner of the team `{team}`",
                self.by.name
            )))
        }
    }
}

pub fn check_email(email: &str) -> Result<String> {
    let email = email.trim();
    let ok = email.len() <= MAX_EMAIL_LEN
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
        });
    if ok {
        Ok(email.to_string())
    } else {
        Err(AccountError::invalid(
            "invalid_email",
            "email",
            "an email address like `name@example.org` is expected",
        ))
    }
}

fn check_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(AccountError::invalid(
            "invalid_name",
            "name",
            format!("a name is at most {MAX_NAME_CHARS} characters, without control characters"),
        ));
    }
    Ok(name.to_string())
}

/// A person's new password: at least [`MIN_PASSWORD_CHARS`] characters, and not their email.
pub fn check_password(password: &str, email: &str, field: &'static str) -> Result<()> {
    let chars = password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars) {
        return Err(AccountError::invalid(
            "invalid_password",
            field,
            format!(
                "a password is {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters, not {chars}"
            ),
        ));
    }
    if email_key(password) == email_key(email) {
        return Err(AccountError::invalid(
            "invalid_password",
            field,
            "the password must not be the email address",
        ));
    }
    Ok(())
}

fn check_slug(slug: &str, field: &'static str) -> Result<String> {
    let ok = !slug.is_empty()
        && slug.len() <= MAX_SLUG_LEN
        && slug
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(slug.to_string())
    } else {
        Err(AccountError::invalid(
            if field == "slug" {
                "invalid_slug"
            } else {
                "invalid_space"
            },
            field,
            format!("1 to {MAX_SLUG_LEN} letters, digits, `_`, `-` and `.` are expected"),
        ))
    }
}

fn user_role(role: &str) -> Result<UserRole> {
    UserRole::parse(role).ok_or_else(|| {
        AccountError::invalid("invalid_role", "role", "the role is `admin` or `member`")
    })
}

pub fn team_role(role: &str) -> Result<TeamRole> {
    TeamRole::parse(role).ok_or_else(|| {
        AccountError::invalid(
            "invalid_role",
            "role",
            "the role is `owner`, `editor` or `viewer`",
        )
    })
}

/// Spaces no other team owns, for `team`.
fn check_spaces(dir: &Directory, team: &str, spaces: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for space in std::iter::once(&team.to_string()).chain(spaces) {
        check_slug(space, "spaces")?;
        if let Some(owner) = dir.space_owner(space).filter(|o| *o != team) {
            return Err(AccountError::conflict(
                "space_taken",
                format!("the space `{space}` belongs to the team `{owner}`"),
            ));
        }
        if space != team && !out.contains(space) {
            out.push(space.clone());
        }
    }
    Ok(out)
}

fn not_found_user(id: &str) -> AccountError {
    AccountError::NotFound(format!("no user has the id `{id}`"))
}

fn not_found_team(slug: &str) -> AccountError {
    AccountError::NotFound(format!("no team has the slug `{slug}`"))
}

/// The records a user's removal takes with it: memberships, identities, the keys they made.
fn user_and_traces(dir: &Directory, id: &str) -> Vec<RecordAddress> {
    let mut out = vec![RecordAddress {
        kind: "user".into(),
        id: id.into(),
    }];
    for team in dir.teams_of(id) {
        out.push(RecordAddress {
            kind: "member".into(),
            id: member_id(&team.0.slug, id),
        });
    }
    for identity in dir.identities_of(id) {
        out.push(AccountRecord::Identity(identity.clone()).address());
    }
    for key in dir
        .keys()
        .filter(|k| k.maker == crate::model::Maker::User(id.to_string()))
    {
        out.push(RecordAddress {
            kind: "key".into(),
            id: key.id.clone(),
        });
    }
    out
}

impl Accounts {
    /// Hashes a person's password in a password-check slot.
    async fn hash(&self, password: &str) -> Result<String> {
        let password = password.to_string();
        self.passwords()
            .run(move || crate::passwords::argon2id(&password))
            .await
            .ok_or(AccountError::Busy)?
            .map_err(|e| AccountError::invalid("invalid_password", "password", e))
    }

    /// Makes a user (admins). Without a password the user signs in through a provider only.
    pub async fn create_user(&self, acting: &Acting<'_>, new: NewUser) -> Result<User> {
        acting.admin()?;
        self.add_user(new, &acting.by.actor.label(), acting.ip)
            .await
    }

    /// Makes a user with no one acting (the `user add` command, a provider's first sign-in).
    pub async fn add_user(&self, new: NewUser, actor: &str, ip: IpAddr) -> Result<User> {
        let email = check_email(&new.email)?;
        let name = check_name(new.name.as_deref().unwrap_or(""))?;
        let role = match new.role.as_deref() {
            None => UserRole::Member,
            Some(r) => user_role(r)?,
        };
        let password = match &new.password {
            Some(p) => {
                check_password(p, &email, "password")?;
                Some(self.hash(p).await?)
            }
            None => None,
        };
        let user = User {
            id: random_text(12, ID_ALPHABET),
            email,
            name,
            role,
            disabled: false,
            created_at: self.now(),
            last_sign_in_at: None,
            password,
            session_epoch: 0,
            key_epoch: 0,
        };
        let made = self.change(|dir| {
            if dir.user_by_email(&user.email).is_some() {
                return Err(AccountError::conflict(
                    "email_taken",
                    format!("a user with the email `{}` exists", user.email),
                ));
            }
            Ok((
                AccountWrite::put(AccountRecord::User(user.clone())),
                user.clone(),
            ))
        })?;
        self.audit.record(
            actor,
            "user.created",
            &format!("user:{}", made.id),
            ip,
            None,
        );
        Ok(made)
    }

    /// Changes a user (admins): name, role, disabled, a new password. Disabling and a new
    /// password end the user's sessions and keys (their epochs move on).
    pub async fn update_user(
        &self,
        acting: &Acting<'_>,
        id: &str,
        patch: UserPatch,
    ) -> Result<User> {
        acting.admin()?;
        let name = patch.name.as_deref().map(check_name).transpose()?;
        let role = patch.role.as_deref().map(user_role).transpose()?;
        let dir = self.directory();
        let current = dir.user(id).ok_or_else(|| not_found_user(id))?;
        let password = match &patch.password {
            Some(p) => {
                check_password(p, &current.email, "password")?;
                Some(self.hash(p).await?)
            }
            None => None,
        };
        let updated = self.change(|dir| {
            let mut user = dir.user(id).ok_or_else(|| not_found_user(id))?.clone();
            if let Some(name) = &name {
                user.name = name.clone();
            }
            if let Some(role) = role {
                user.role = role;
            }
            let mut end_all = password.is_some();
            if let Some(disabled) = patch.disabled {
                end_all |= disabled && !user.disabled;
                user.disabled = disabled;
            }
            if let Some(hash) = &password {
                user.password = Some(hash.clone());
            }
            if end_all {
                user.session_epoch = user.session_epoch.wrapping_add(1);
                user.key_epoch = user.key_epoch.wrapping_add(1);
            }
            Ok((AccountWrite::put(AccountRecord::User(user.clone())), user))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "user.updated",
            &format!("user:{id}"),
            acting.ip,
            None,
        );
        Ok(updated)
    }

    /// Removes a user (admins), with their memberships, identities and keys.
    pub fn delete_user(&self, acting: &Acting<'_>, id: &str) -> Result<()> {
        acting.admin()?;
        self.change(|dir| {
            dir.user(id).ok_or_else(|| not_found_user(id))?;
            Ok((
                AccountWrite {
                    put: Vec::new(),
                    delete: user_and_traces(dir, id),
                },
                (),
            ))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "user.deleted",
            &format!("user:{id}"),
            acting.ip,
            None,
        );
        Ok(())
    }

    /// A user's own new password, given the current one (from their session, or a key they
    /// made); ends their other sessions (not their keys). Returns the session epoch to open the caller's next session under.
    pub async fn change_own_password(
        &self,
        acting: &Acting<'_>,
        current: &str,
        new: &str,
    ) -> Result<u32> {
        // A signed-in user, or a key a user made (the current password is asked either way).
        let Some(id) = acting.by.actor.user() else {
            return Err(AccountError::forbidden(
                "only a user changes their own password (this key was made by no user)",
            ));
        };
        let id = id.to_string();
        let user = self
            .directory()
            .user(&id)
            .cloned()
            .ok_or_else(|| not_found_user(&id))?;
        let right = match user.password.clone() {
            Some(hash) => match self.passwords().verify(hash, current.to_string()).await {
                crate::passwords::Check::Right => true,
                crate::passwords::Check::Wrong => false,
                crate::passwords::Check::Busy => return Err(AccountError::Busy),
            },
            None => current.is_empty(),
        };
        if !right {
            return Err(AccountError::WrongPassword);
        }
        check_password(new, &user.email, "new")?;
        let hash = self.hash(new).await?;
        let epoch = self.change(|dir| {
            let mut user = dir.user(&id).ok_or_else(|| not_found_user(&id))?.clone();
            user.password = Some(hash.clone());
            user.session_epoch = user.session_epoch.wrapping_add(1);
            let epoch = user.session_epoch;
            Ok((AccountWrite::put(AccountRecord::User(user)), epoch))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "user.updated",
            &format!("user:{id}"),
            acting.ip,
            None,
        );
        Ok(epoch)
    }

    /// Makes a team (admins); it owns its slug's space and any `spaces` given.
    pub fn create_team(&self, acting: &Acting<'_>, new: NewTeam) -> Result<Team> {
        acting.admin()?;
        let slug = check_slug(&new.slug, "slug")?;
        let name = check_name(new.name.as_deref().unwrap_or(&slug))?;
        let plan = new
            .plan
            .as_deref()
            .map(|p| check_slug(p, "plan"))
            .transpose()?;
        if let Some(plan) = &plan {
            self.check_plan(plan)?;
        }
        let now = self.now();
        let team = self.change(|dir| {
            if dir.team(&slug).is_some() {
                return Err(AccountError::conflict(
                    "team_exists",
                    format!("a team with the slug `{slug}` exists"),
                ));
            }
            let spaces = check_spaces(dir, &slug, &new.spaces)?;
            let team = Team {
                slug: slug.clone(),
                name: if name.is_empty() {
                    slug.clone()
                } else {
                    name.clone()
                },
                plan: plan.clone(),
                spaces,
                created_at: now,
            };
            Ok((AccountWrite::put(AccountRecord::Team(team.clone())), team))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "team.created",
            &format!("team:{slug}"),
            acting.ip,
            Some(&slug),
        );
        Ok(team)
    }

    /// Changes a team: its name (owners too), its plan and spaces (admins).
    pub fn update_team(&self, acting: &Acting<'_>, slug: &str, patch: TeamPatch) -> Result<Team> {
        if patch.plan.is_some() || patch.spaces.is_some() {
            acting.admin()?;
        } else {
            acting.owner_of(slug)?;
        }
        let name = patch.name.as_deref().map(check_name).transpose()?;
        let plan = match &patch.plan {
            Some(Some(p)) => {
                let p = check_slug(p, "plan")?;
                self.check_plan(&p)?;
                Some(Some(p))
            }
            Some(None) => Some(None),
            None => None,
        };
        let team = self.change(|dir| {
            let mut team = dir.team(slug).ok_or_else(|| not_found_team(slug))?.clone();
            if let Some(name) = &name {
                team.name = name.clone();
            }
            if let Some(plan) = &plan {
                team.plan = plan.clone();
            }
            if let Some(spaces) = &patch.spaces {
                team.spaces = check_spaces(dir, slug, spaces)?;
            }
            Ok((AccountWrite::put(AccountRecord::Team(team.clone())), team))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "team.updated",
            &format!("team:{slug}"),
            acting.ip,
            Some(slug),
        );
        Ok(team)
    }

    /// Removes a team (admins) with its memberships and the keys limited to it. Its links stay
    /// in their spaces, which admins still reach.
    pub fn delete_team(&self, acting: &Acting<'_>, slug: &str) -> Result<()> {
        acting.admin()?;
        self.change(|dir| {
            dir.team(slug).ok_or_else(|| not_found_team(slug))?;
            let mut delete = vec![RecordAddress {
                kind: "team".into(),
                id: slug.into(),
            }];
            delete.extend(dir.members(slug).map(|(user, _)| RecordAddress {
                kind: "member".into(),
                id: member_id(slug, user),
            }));
            delete.extend(
                dir.keys()
                    .filter(|k| k.team.as_deref() == Some(slug))
                    .map(|k| RecordAddress {
                        kind: "key".into(),
                        id: k.id.clone(),
                    }),
            );
            Ok((
                AccountWrite {
                    put: Vec::new(),
                    delete,
                },
                (),
            ))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "team.deleted",
            &format!("team:{slug}"),
            acting.ip,
            Some(slug),
        );
        Ok(())
    }

    /// Adds a member or changes their role (owners, admins).
    pub fn set_member(
        &self,
        acting: &Acting<'_>,
        slug: &str,
        user_id: &str,
        role: &str,
    ) -> Result<Member> {
        acting.owner_of(slug)?;
        let role = team_role(role)?;
        let member = self.change(|dir| {
            dir.team(slug).ok_or_else(|| not_found_team(slug))?;
            dir.user(user_id).ok_or_else(|| not_found_user(user_id))?;
            let member = Member {
                team: slug.to_string(),
                user_id: user_id.to_string(),
                role,
            };
            Ok((
                AccountWrite::put(AccountRecord::Member(member.clone())),
                member,
            ))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "member.set",
            &format!("member:{slug}/{user_id}"),
            acting.ip,
            Some(slug),
        );
        Ok(member)
    }

    /// Removes a member (owners, admins); the keys they limited to the team go with them.
    pub fn remove_member(&self, acting: &Acting<'_>, slug: &str, user_id: &str) -> Result<()> {
        acting.owner_of(slug)?;
        self.change(|dir| {
            dir.team(slug).ok_or_else(|| not_found_team(slug))?;
            if dir.member_role(slug, user_id).is_none() {
                return Err(AccountError::NotFound(format!(
                    "the user `{user_id}` is not a member of `{slug}`"
                )));
            }
            let mut delete = vec![RecordAddress {
                kind: "member".into(),
                id: member_id(slug, user_id),
            }];
            delete.extend(
                dir.keys()
                    .filter(|k| {
                        k.team.as_deref() == Some(slug)
                            && k.maker == crate::model::Maker::User(user_id.to_string())
                    })
                    .map(|k| RecordAddress {
                        kind: "key".into(),
                        id: k.id.clone(),
                    }),
            );
            Ok((
                AccountWrite {
                    put: Vec::new(),
                    delete,
                },
                (),
            ))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "member.removed",
            &format!("member:{slug}/{user_id}"),
            acting.ip,
            Some(slug),
        );
        Ok(())
    }

    /// The teams a caller sees: every team for admins, else those whose spaces it reaches.
    pub fn teams_for(&self, by: &Principal) -> Vec<Team> {
        let dir = self.directory();
        dir.teams()
            .filter(|t| by.everywhere() || by.allows_space(&t.slug))
            .cloned()
            .collect()
    }

    /// A team, if the caller may see it (admins, and whoever reaches its space).
    pub fn team_for(&self, by: &Principal, slug: &str) -> Result<Team> {
        let dir = self.directory();
        match dir.team(slug) {
            Some(team) if by.everywhere() || by.allows_space(slug) => Ok(team.clone()),
            _ => Err(not_found_team(slug)),
        }
    }

    /// Users (admins).
    pub fn users_for(&self, by: &Principal) -> Result<Vec<User>> {
        if !by.everywhere() {
            return Err(AccountError::forbidden(format!(
                "`{}` is not an admin of this instance",
                by.name
            )));
        }
        Ok(self.directory().users().cloned().collect())
    }

    /// One user (admins; anyone for themselves).
    pub fn user_for(&self, by: &Principal, id: &str) -> Result<User> {
        if !by.everywhere() && by.actor.user() != Some(id) {
            return Err(AccountError::forbidden(format!(
                "`{}` is not an admin of this instance",
                by.name
            )));
        }
        self.directory()
            .user(id)
            .cloned()
            .ok_or_else(|| not_found_user(id))
    }
}
