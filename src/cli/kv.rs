//! `mnemos kv namespaces|get|put|delete|list`: KV namespaces over the contract.

use clap::Subcommand;
use mnemos::auth::Caller;
use mnemos::contract::kv::{
    self, KvDeleteResponse, KvEntryView, KvKeyBody, KvListByTagBody, KvListResponse, KvPutBody,
    KvPutResponse,
};
use mnemos::contract::lifecycle::{self, NamespaceSummary};
use mnemos_actors::Runtime;

use super::{print, user_error};

/// What `mnemos kv` does.
#[derive(Subcommand)]
pub(crate) enum KvAction {
    /// The KV namespaces of the tenant.
    Namespaces,
    /// Read an entry (a use: it becomes the most recent).
    Get {
        /// The namespace.
        namespace: String,
        /// The key.
        key: String,
    },
    /// Write an entry (the namespace is created on first put).
    Put {
        /// The namespace.
        namespace: String,
        /// The key.
        key: String,
        /// The value: JSON, or else taken as a string.
        value: String,
        /// The node (agent) writing it.
        #[arg(long)]
        agent: String,
        /// Comma-separated tags.
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
        /// Seconds until it expires.
        #[arg(long)]
        ttl: Option<u64>,
    },
    /// Remove an entry.
    Delete {
        /// The namespace.
        namespace: String,
        /// The key.
        key: String,
    },
    /// Entries, most recently used first.
    List {
        /// The namespace.
        namespace: String,
        /// Only entries with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Most entries.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

/// One entry as a line of text.
fn entry_line(e: &KvEntryView) -> String {
    format!(
        "{:<24} {}{}",
        e.key,
        e.value,
        if e.tags.is_empty() {
            String::new()
        } else {
            format!("  [{}]", e.tags.join(", "))
        }
    )
}

/// `mnemos kv …`.
pub(crate) async fn run(
    runtime: &Runtime,
    caller: &Caller,
    action: KvAction,
    json: bool,
) -> anyhow::Result<()> {
    match action {
        KvAction::Namespaces => {
            let found = lifecycle::list_namespaces(runtime, caller)
                .await
                .map_err(user_error)?;
            print(json, &found, |found: &Vec<NamespaceSummary>| {
                if found.is_empty() {
                    return "no KV namespaces".to_string();
                }
                found
                    .iter()
                    .map(|n| {
                        format!(
                            "{:<24} max {:<8} {} puts",
                            n.namespace, n.max_entries, n.puts
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        KvAction::Get { namespace, key } => {
            let body = KvKeyBody {
                namespace,
                key,
                agent_id: None,
            };
            let entry = kv::kv_get(runtime, caller, body)
                .await
                .map_err(user_error)?;
            print(json, &entry, entry_line);
        }
        KvAction::Put {
            namespace,
            key,
            value,
            agent,
            tags,
            ttl,
        } => {
            let value = serde_json::from_str(&value).unwrap_or(serde_json::Value::String(value));
            let body = KvPutBody {
                agent_id: Some(agent),
                namespace,
                key,
                value,
                tags: Some(tags),
                ttl_seconds: ttl,
            };
            let put = kv::kv_put(runtime, caller, body)
                .await
                .map_err(user_error)?;
            print(json, &put, |p: &KvPutResponse| {
                let mut out = format!(
                    "{} {}",
                    if p.created { "created" } else { "updated" },
                    entry_line(&p.entry)
                );
                if !p.evicted.is_empty() {
                    out.push_str(&format!("\nevicted: {}", p.evicted.join(", ")));
                }
                out
            });
        }
        KvAction::Delete { namespace, key } => {
            let body = KvKeyBody {
                namespace,
                key,
                agent_id: None,
            };
            let deleted = kv::kv_delete(runtime, caller, body)
                .await
                .map_err(user_error)?;
            print(json, &deleted, |d: &KvDeleteResponse| {
                format!("deleted {}", d.deleted)
            });
        }
        KvAction::List {
            namespace,
            tag,
            limit,
        } => {
            let body = KvListByTagBody {
                namespace,
                tag,
                limit: Some(limit),
                agent_id: None,
            };
            let found = kv::kv_list_by_tag(runtime, caller, body)
                .await
                .map_err(user_error)?;
            print(json, &found, |l: &KvListResponse| {
                if l.entries.is_empty() {
                    return "no entries".to_string();
                }
                l.entries
                    .iter()
                    .map(entry_line)
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}
