//! Operator commands: `consolidate`, `archive`, `reindex`, `erase`, `doctor`, `keys`,
//! `audit`.

use mnemos::app::Services;
use mnemos::auth::Caller;
use mnemos::config::Settings;
use mnemos::contract::keys::{AdminListParams, CreateKeyBody, CreatedKeyResponse, KeysResponse};
use mnemos::contract::wire::{AgentBody, RunView};
use mnemos::contract::{memories, tools};
use mnemos_actors::model::TenantId;
use mnemos_actors::Runtime;

use super::{print, user_error};
use crate::KeysAction;

/// `mnemos erase --agent A | --tenant T`.
pub(crate) async fn erase(
    services: &Services,
    caller: &Caller,
    agent: Option<String>,
    tenant: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let keys = services.record().keys();
    match (agent, tenant) {
        (Some(agent), tenant) => {
            // --tenant names the agent's tenant (as `--as-tenant` does).
            let mut caller = caller.clone();
            if let Some(raw) = tenant {
                let tenant = TenantId::parse(&raw).map_err(user_error)?;
                caller.tenant = Caller::tenant_of(&tenant);
            }
            let erased = mnemos::contract::erase::erase_agent(
                &services.runtime,
                keys.as_ref(),
                &caller,
                &agent,
            )
            .await
            .map_err(user_error)?;
            print(
                json,
                &erased,
                |e: &mnemos::contract::erase::EraseResponse| erase_summary(e),
            );
        }
        (None, Some(tenant)) => {
            let erased = mnemos::contract::erase::erase_tenant(
                &services.runtime,
                keys.as_ref(),
                caller,
                &tenant,
            )
            .await
            .map_err(user_error)?;
            print(
                json,
                &erased,
                |t: &mnemos::contract::erase::TenantEraseResponse| {
                    let mut lines: Vec<String> = t.agents.iter().map(erase_summary).collect();
                    lines.push(format!(
                        "tenant {}: {} agent(s) erased, {} key(s) revoked",
                        t.tenant,
                        t.agents.len(),
                        t.keys_revoked
                    ));
                    lines.join("\n")
                },
            );
        }
        (None, None) => {
            anyhow::bail!("name what to erase: --agent AGENT (and --tenant), or --tenant TENANT")
        }
    }
    Ok(())
}

/// One line per store of an agent's erasure.
pub(crate) fn erase_summary(e: &mnemos::contract::erase::EraseResponse) -> String {
    let r = &e.system_of_record;
    format!(
        "erased {}/{}: system of record: {} memories, {} versions, {} embeddings, {} edges, \
         {} sessions ({} messages), {} projects, {} runs, {} KV entries; vector index: {}; \
         working memory: {} items; projection deletes queued: {}",
        e.tenant,
        e.agent_id,
        r.memories,
        r.versions,
        r.embeddings,
        r.edges,
        r.sessions,
        r.session_messages,
        r.projects,
        r.runs,
        r.kv_entries,
        e.vector_index,
        e.working_memory,
        e.projection_deletes_queued
    )
}

/// `mnemos doctor [--repair]`: report (and repair) the rows reads skip.
pub(crate) async fn doctor(services: &Services, repair: bool, json: bool) -> anyhow::Result<()> {
    let record = services.record();
    if !repair {
        let found = record.find_unreadable().await.map_err(user_error)?;
        if json {
            println!("{}", serde_json::to_string_pretty(&found)?);
        } else if found.is_empty() {
            println!("every row reads back; nothing to repair");
        } else {
            for row in &found {
                println!("{} {}: {}", row.table, row.id, row.error);
            }
            println!(
                "{} unreadable value(s); `mnemos doctor --repair` rewrites them",
                found.len()
            );
        }
        return Ok(());
    }
    let repaired = record
        .repair_unreadable(services.runtime.now())
        .await
        .map_err(user_error)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&repaired)?);
    } else {
        for r in &repaired {
            println!(
                "{} {} {}: {:?} -> {}",
                r.table, r.id, r.column, r.was, r.now
            );
        }
        println!("{} value(s) repaired", repaired.len());
    }
    Ok(())
}

/// `mnemos consolidate`: the `consolidate` tool for one agent, or every agent with memories.
pub(crate) async fn consolidate(
    services: &Services,
    caller: &Caller,
    agent_id: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let tenant = caller.tenant.as_ref().map(|t| t.as_str());
    let agents: Vec<String> = match agent_id {
        Some(agent_id) => vec![agent_id],
        None => services
            .store
            .agents()
            .await
            .map_err(user_error)?
            .into_iter()
            .filter(|a| a.tenant() == tenant)
            .map(|a| a.local().to_string())
            .collect(),
    };
    let bar = super::progress(agents.len() as u64, "consolidating");
    let mut runs = Vec::new();
    for agent_id in agents {
        let body = AgentBody {
            agent_id: Some(agent_id),
        };
        let run = tools::consolidate(&services.runtime, caller, body, "cli")
            .await
            .map_err(user_error)?;
        runs.push(run);
        bar.inc(1);
    }
    bar.finish_and_clear();
    print(json, &runs, |runs: &Vec<RunView>| {
        runs.iter()
            .map(|r| {
                format!(
                    "sleep cycle {} for {}: {} candidates, {} consolidated into {} semantic + {} procedural, {} forgotten",
                    r.id,
                    r.agent_id.as_deref().unwrap_or("-"),
                    r.processed,
                    r.consolidated,
                    r.new_semantic,
                    r.new_procedural,
                    r.forgotten
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

/// `mnemos archive`: archive idle sessions now.
pub(crate) async fn archive(runtime: &Runtime, caller: &Caller, json: bool) -> anyhow::Result<()> {
    let run = memories::archive(runtime, caller, "cli")
        .await
        .map_err(user_error)?;
    print(json, &run, |r: &RunView| {
        format!(
            "archival {}: {} idle sessions summarised",
            r.id, r.processed
        )
    });
    Ok(())
}

/// `mnemos reindex`: rebuild the vector index and/or the external projections from SQL.
/// `mnemos reindex --reembed`: every memory re-embedded with the configured model,
/// with a progress bar, then the switch.
pub(crate) async fn reembed(
    services: &Services,
    caller: &Caller,
    settings: &mnemos::config::Settings,
    json: bool,
) -> anyhow::Result<()> {
    let runtime = &services.runtime;
    let Some(pending) = services.pending_embedder.clone() else {
        let view = mnemos::contract::embedding::status(runtime, caller, None)
            .await
            .map_err(user_error)?;
        print(json, &view, |v| {
            format!(
                "nothing to do: the stored vectors come from the configured model {}",
                v.serving
            )
        });
        return Ok(());
    };
    if settings.vectors.backend == "qdrant" {
        anyhow::bail!(
            "vectors.backend: re-embedding beside a Qdrant projection is not supported; set vectors.backend = \"embedded\" for it, then point vectors.collection at a new collection"
        );
    }
    caller
        .require(mnemos::auth::Scope::Admin)
        .map_err(user_error)?;
    let bar = mnemos::telemetry::progress(0, "re-embedding");
    let status = runtime
        .reembed(pending.embedder.clone(), pending.spec.clone(), &|status| {
            bar.set_length(status.counts.total);
            bar.set_position(status.counts.done);
        })
        .await
        .map_err(user_error)?;
    bar.finish_and_clear();
    let view = mnemos::contract::embedding::ReembedView::of(status, Some(&pending));
    print(json, &view, |v| {
        format!(
            "re-embedded {} memories; {} serves now (the switch paused requests {:.0} ms)",
            v.embedded,
            v.serving,
            v.pause_ms.unwrap_or_default()
        )
    });
    Ok(())
}

pub(crate) async fn reindex(
    runtime: &Runtime,
    projection: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let bar = super::spinner("rebuilding…");
    let mut done: Vec<(String, u64)> = Vec::new();
    if projection.as_deref().is_none_or(|p| p == "vectors") {
        bar.set_message("rebuilding the vector index from stored embeddings…");
        let vectors = runtime.reindex().await.map_err(user_error)?;
        done.push(("vectors".into(), vectors as u64));
    }
    if projection.as_deref() != Some("vectors") {
        bar.set_message("rebuilding external projections from SQL…");
        done.extend(
            runtime
                .rebuild_projections(projection.clone())
                .await
                .map_err(user_error)?,
        );
    }
    bar.finish_and_clear();
    let report: Vec<serde_json::Value> = done
        .iter()
        .map(|(name, n)| serde_json::json!({"projection": name, "covered": n}))
        .collect();
    print(json, &report, |r: &Vec<serde_json::Value>| {
        r.iter()
            .map(|p| {
                format!(
                    "{}: rebuilt ({})",
                    p["projection"].as_str().unwrap_or(""),
                    p["covered"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

/// `mnemos keys create|list|revoke`: on the system of record alone (no runtime and no
/// data-directory lock), so it works beside a running server.
pub(crate) async fn keys(
    settings: &Settings,
    caller: &Caller,
    action: KeysAction,
    json: bool,
) -> anyhow::Result<()> {
    let record = mnemos::store::SystemOfRecord::open(settings)
        .await
        .map_err(user_error)?;
    let store = record.keys();
    let now = chrono::Utc::now();
    let result = match action {
        KeysAction::Create {
            tenant,
            agent,
            scope,
            name,
            expires_in_days,
        } => {
            let body = CreateKeyBody {
                name,
                tenant: Some(tenant),
                agent,
                scopes: scope,
                expires_at: expires_in_days
                    .map(|days| now + chrono::Duration::days(i64::from(days))),
            };
            mnemos::contract::keys::create_key(store.as_ref(), caller, body, now)
                .await
                .map(|created| {
                    print(json, &created, |c: &CreatedKeyResponse| {
                        format!(
                            "{}\n\nkey {} for tenant {}, agent {}, scopes {}{}.\n\
                             This is the only time the key is shown: keep it now.",
                            c.secret,
                            c.key.id,
                            c.key.tenant,
                            c.key.agent,
                            c.key.scopes.join(","),
                            c.key
                                .expires_at
                                .map(|at| format!(", expires {at}"))
                                .unwrap_or_default()
                        )
                    })
                })
        }
        KeysAction::List { tenant } => {
            let params = AdminListParams {
                tenant,
                limit: None,
            };
            mnemos::contract::keys::list_keys(store.as_ref(), caller, params, now)
                .await
                .map(|listed| {
                    print(json, &listed, |l: &KeysResponse| {
                        if l.keys.is_empty() {
                            return "no keys; `mnemos keys create` makes one".to_string();
                        }
                        l.keys
                            .iter()
                            .map(|k| {
                                format!(
                                    "{}  {:<8} {:<12} {:<12} {:<16} used {}  {}",
                                    k.id,
                                    k.status,
                                    k.tenant,
                                    k.agent,
                                    k.scopes.join(","),
                                    k.last_used_at
                                        .map(|at| at.format("%Y-%m-%d %H:%M").to_string())
                                        .unwrap_or_else(|| "never".into()),
                                    k.name
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                })
        }
        KeysAction::Revoke { id } => {
            mnemos::contract::keys::revoke_key(store.as_ref(), caller, &id, now)
                .await
                .map(|revoked| print(json, &revoked, |r| format!("revoked key {}", r.revoked)))
        }
    };
    record.close().await;
    result.map_err(user_error)
}

/// `mnemos audit`: the latest audit entries.
pub(crate) async fn audit(
    settings: &Settings,
    caller: &Caller,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let record = mnemos::store::SystemOfRecord::open(settings)
        .await
        .map_err(user_error)?;
    let params = AdminListParams {
        tenant: None,
        limit: Some(limit),
    };
    let result = mnemos::contract::keys::audit_log(record.keys().as_ref(), caller, params).await;
    record.close().await;
    let log = result.map_err(user_error)?;
    print(json, &log, |l| {
        l.entries
            .iter()
            .map(|e| {
                format!(
                    "{}  {:<14} {:<14} {} {}",
                    e.at.format("%Y-%m-%d %H:%M:%S"),
                    e.action,
                    e.actor,
                    e.target.as_deref().unwrap_or("-"),
                    e.detail
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}
