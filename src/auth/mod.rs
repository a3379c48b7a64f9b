//! Who is asking: API keys, the caller they make a request, and what the caller may do.
//!
//! Every surface turns its credentials into one [`Caller`] before the contract runs: REST
//! and `/mcp` from `Authorization: Bearer <key>`, the proxy from the client's API key (the
//! same header), the CLI and MCP over stdio as the local operator. The contract asks the
//! caller for the agent a request acts as ([`Caller::agent`]) and checks its scope
//! ([`Caller::require`]); nothing below the contract knows about keys.
//!
//! Tenants partition everything: an agent of tenant `acme` is `acme/alice` in the
//! runtime (`AgentId::qualified`), so its memories, projects, sessions, shared pool and
//! KV namespaces are apart from every other tenant's; the tenant `default` is the
//! unqualified ids a server without keys uses.

pub mod keys;
pub mod limits;

use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};
use mnemos_actors::kv::NamespaceName;
use mnemos_actors::model::{AgentId, TenantId};
use serde::{Deserialize, Serialize};

/// The tenant whose agents keep the ids clients send (a server without keys is in it).
pub const DEFAULT_TENANT: &str = "default";

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Recall, browse, read.
    Read,
    /// Remember, change, forget, delete.
    Write,
    /// Keys, erasure, the run log of every agent, metrics, health detail, admin routes.
    Admin,
}

impl Scope {
    /// Every scope, in order.
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Admin];
    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }
    /// Parse `read,write,admin`; the error names `field`.
    pub fn parse_list(field: &str, raw: &str) -> MemoryResult<Vec<Scope>> {
        let mut scopes: Vec<Scope> = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let scope = Self::ALL
                .into_iter()
                .find(|s| s.as_str() == part)
                .ok_or_else(|| {
                    MemoryError::invalid(
                        field,
                        format!("unknown scope {part:?}; use read, write and/or admin"),
                    )
                })?;
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        if scopes.is_empty() {
            return Err(MemoryError::invalid(
                field,
                "name at least one scope: read, write or admin",
            ));
        }
        scopes.sort();
        Ok(scopes)
    }
}

/// Which surface a request came through (recorded as provenance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// REST.
    Rest,
    /// MCP over streamable HTTP or stdio.
    Mcp,
    /// The OpenAI-compatible proxy.
    Proxy,
    /// The command line, on a local data directory.
    Cli,
}

/// The limits a caller's writes are charged to (None: the operator, not limited).
/// Two callers compare equal whatever their budgets: it is where usage is counted, not
/// part of who the caller is.
#[derive(Clone, Default)]
pub struct Budget(pub Option<std::sync::Arc<limits::Limiter>>);

impl PartialEq for Budget {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Budget {}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Budget(limited)"
        } else {
            "Budget(none)"
        })
    }
}

/// Who makes a request, in which tenant, as which agents, with which scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The key's id; None for the local operator (CLI, stdio, a server without keys).
    pub key_id: Option<String>,
    /// The tenant the request acts in (None: the default tenant).
    pub tenant: Option<TenantId>,
    /// The one agent the key acts as (None: any agent of the tenant).
    pub agent: Option<AgentId>,
    /// What the caller may do.
    pub scopes: Vec<Scope>,
    /// Where the request came from.
    pub surface: Surface,
    /// Where its writes are counted.
    pub budget: Budget,
    /// The request's id (`X-Request-Id`), recorded in the provenance of what it writes.
    pub request_id: Option<String>,
}

impl Caller {
    /// The local operator: the default tenant, any agent, every scope.
    pub fn operator(surface: Surface) -> Self {
        Self {
            key_id: None,
            tenant: None,
            agent: None,
            scopes: Scope::ALL.to_vec(),
            surface,
            budget: Budget::default(),
            request_id: None,
        }
    }

    /// Where a write of this caller comes from, as kept in a memory's metadata under
    /// [`mnemos_actors::model::PROVENANCE_KEY`].
    pub fn provenance(&self, session: Option<&str>) -> serde_json::Value {
        serde_json::json!({
            "key_id": self.key_id,
            "surface": self.surface,
            "session_id": session,
            "request_id": self.request_id,
        })
    }

    /// `metadata` (a client's object, or none) with this caller's provenance in it.
    pub fn with_provenance(
        &self,
        metadata: Option<serde_json::Value>,
        session: Option<&str>,
    ) -> Option<serde_json::Value> {
        let key = mnemos_actors::model::PROVENANCE_KEY;
        match metadata {
            None => Some(serde_json::json!({ key: self.provenance(session) })),
            Some(serde_json::Value::Object(mut map)) => {
                map.insert(key.to_string(), self.provenance(session));
                Some(serde_json::Value::Object(map))
            }
            // Not an object: left for validation to refuse as it is.
            Some(other) => Some(other),
        }
    }

    /// The tenant of `raw` as the runtime knows it (None for `default`).
    pub fn tenant_of(raw: &TenantId) -> Option<TenantId> {
        (raw.as_str() != DEFAULT_TENANT).then(|| raw.clone())
    }

    /// 403 unless the caller has `scope`; a write is also charged to the key's write
    /// budget (429 past it).
    pub fn require(&self, scope: Scope) -> MemoryResult<()> {
        if self.scopes.contains(&scope) {
            if scope == Scope::Write {
                self.spend_writes(1)?;
            }
            return Ok(());
        }
        Err(denied(format!(
            "this key has no {} scope (it has {}); use a key created with --scope {}",
            scope.as_str(),
            self.scopes
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            scope.as_str()
        )))
    }

    /// Charge `n` more memories to the key's write budget.
    pub fn spend_writes(&self, n: usize) -> MemoryResult<()> {
        match (&self.budget.0, &self.key_id) {
            (Some(limiter), Some(key)) => limiter.writes(
                key,
                u32::try_from(n).unwrap_or(u32::MAX),
                std::time::Instant::now(),
            ),
            _ => Ok(()),
        }
    }

    /// Charge `n` memories to the budget of session (task) `session` of this key
    /// (`extract_turn`, session messages, the proxy).
    pub fn spend_session_writes(&self, session: &str, n: usize) -> MemoryResult<()> {
        match (&self.budget.0, &self.key_id) {
            (Some(limiter), Some(key)) => limiter.session_writes(
                key,
                session,
                u32::try_from(n).unwrap_or(u32::MAX),
                std::time::Instant::now(),
            ),
            _ => Ok(()),
        }
    }

    /// The agent a request acts as, as the runtime knows it: the one the caller names
    /// (`named`, from the field `field`), which must be the key's own agent when the key
    /// is bound to one; or the key's agent when the request names none.
    pub fn agent(&self, field: &str, named: Option<&str>) -> MemoryResult<AgentId> {
        let local = match (named, &self.agent) {
            (Some(raw), Some(own)) => {
                let asked = AgentId::parse(raw).map_err(|e| renamed(e, field))?;
                if asked != *own {
                    return Err(MemoryError {
                        field: Some(field.into()),
                        ..denied(format!(
                            "this key acts as agent {own} only; leave {field} out or name {own}"
                        ))
                    });
                }
                asked
            }
            (Some(raw), None) => AgentId::parse(raw).map_err(|e| renamed(e, field))?,
            (None, Some(own)) => own.clone(),
            (None, None) => {
                return Err(MemoryError::invalid(
                    field,
                    format!("{field} is required (or use a key bound to one agent)"),
                ))
            }
        };
        Ok(AgentId::qualified(self.tenant.as_ref(), &local))
    }

    /// [`Self::agent`] when the request may name no agent at all (a read by id from a
    /// server without keys is refused: by-id routes always check the owner).
    pub fn owner(&self, field: &str, named: Option<&str>) -> MemoryResult<AgentId> {
        self.agent(field, named).map_err(|error| match error.code {
            ErrorCode::InvalidArgument if named.is_none() => MemoryError::invalid(
                field,
                format!(
                    "name the agent that owns it in {field}: a memory is read, changed or deleted only by its owner"
                ),
            ),
            _ => error,
        })
    }

    /// `text` as the caller knows its ids: the runtime's `tenant/agent` (and
    /// `tenant/namespace`) of the caller's tenant read as the local id, so no message
    /// shows how tenants are kept apart.
    pub fn localize(&self, text: &str) -> String {
        match &self.tenant {
            Some(tenant) => text.replace(
                &format!("{tenant}{}", mnemos_actors::model::TENANT_SEPARATOR),
                "",
            ),
            None => text.to_string(),
        }
    }

    /// [`Self::localize`] of an error's message.
    pub fn localize_error(&self, mut error: MemoryError) -> MemoryError {
        error.message = self.localize(&error.message);
        error
    }

    /// The KV namespace `name` of the caller's tenant, as stored.
    pub fn namespace(&self, name: &NamespaceName) -> NamespaceName {
        NamespaceName::qualified(self.tenant.as_ref(), name)
    }
}

/// `error` (from parsing an agent id) attributed to `field`.
fn renamed(mut error: MemoryError, field: &str) -> MemoryError {
    error.field = Some(field.into());
    error
}

/// A 403 `permission_denied` with `message`.
pub fn denied(message: impl Into<String>) -> MemoryError {
    MemoryError::new(ErrorCode::PermissionDenied, message)
}

/// A 401 `unauthenticated` with `message`.
pub fn unauthenticated(message: impl Into<String>) -> MemoryError {
    MemoryError::new(ErrorCode::Unauthenticated, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(agent: Option<&str>, scopes: &[Scope]) -> Caller {
        Caller {
            key_id: Some("k1".into()),
            tenant: Some(TenantId::parse("acme").unwrap()),
            agent: agent.map(|a| AgentId::parse(a).unwrap()),
            scopes: scopes.to_vec(),
            surface: Surface::Rest,
            budget: Budget::default(),
            request_id: None,
        }
    }

    #[test]
    fn a_bound_key_supplies_its_agent_and_refuses_another() {
        let alice = key(Some("alice"), &[Scope::Read]);
        assert_eq!(
            alice.agent("agent_id", None).unwrap().as_str(),
            "acme/alice"
        );
        assert_eq!(
            alice.agent("agent_id", Some("alice")).unwrap().as_str(),
            "acme/alice"
        );
        let error = alice.agent("agent_id", Some("bob")).unwrap_err();
        assert_eq!(
            (error.code, error.field.as_deref()),
            (ErrorCode::PermissionDenied, Some("agent_id"))
        );
        let any = key(None, &[Scope::Read]);
        assert_eq!(
            any.agent("agent_id", Some("bob")).unwrap().as_str(),
            "acme/bob"
        );
        assert_eq!(
            any.agent("agent_id", None).unwrap_err().code,
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            any.agent("agent_id", Some("acme/bob")).unwrap_err().code,
            ErrorCode::InvalidArgument,
            "no client can name a qualified id"
        );
        let operator = Caller::operator(Surface::Cli);
        assert_eq!(
            operator.agent("agent_id", Some("bob")).unwrap().as_str(),
            "bob"
        );
    }

    #[test]
    fn scopes_are_checked_and_parsed() {
        let reader = key(None, &[Scope::Read]);
        assert!(reader.require(Scope::Read).is_ok());
        assert_eq!(
            reader.require(Scope::Write).unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        assert_eq!(
            Scope::parse_list("scope", "write, read,read").unwrap(),
            vec![Scope::Read, Scope::Write]
        );
        assert!(Scope::parse_list("scope", "root").is_err());
        assert!(Scope::parse_list("scope", "").is_err());
    }
}
