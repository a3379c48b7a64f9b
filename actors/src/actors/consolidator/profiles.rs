//! The sleep cycle's profile step: keep one profile memory per often-named entity true
//! to its facts (what to do is [`crate::policy::profiles::plan_profiles`]'s; this does it
//! through the consolidator's handles).

use super::*;

/// What the profile step did, for the run log.
#[derive(Debug, Default, serde::Serialize)]
pub(super) struct ProfileTally {
    /// Profile memories written.
    created: Vec<MemoryId>,
    /// Profiles rewritten because their entity's facts changed.
    refreshed: Vec<MemoryId>,
    /// Profiles archived because their entity is gone.
    retired: Vec<MemoryId>,
    /// Why profiles were not looked at, when they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
}

/// Most of an agent's entities looked at for profiles in one run.
const MAX_PROFILED_ENTITIES: usize = 20_000;

/// Keep the profiles of the agent's often-named entities true to their facts
/// ([`crate::policy::profiles::plan_profiles`]): write the missing ones, rewrite those
/// whose facts changed (the old text stays in the memory's history), archive those of
/// entities that are gone. Only facts stated by memories outside any project are
/// used, so a profile (which belongs to no project) never carries a project's
/// knowledge out of it. Without an entity index, or when it fails, the run goes on
/// without profiles.
pub(super) async fn refresh_profiles(
    args: &ConsolidatorArgs,
    agent: &AgentId,
    memories: &[Memory],
) -> MemoryResult<ProfileTally> {
    use crate::policy::profiles::{plan_profiles, ExistingProfile, ProfileAction, PROFILE_KEY};
    let mut tally = ProfileTally::default();
    let Some(index) = args.entities.as_deref() else {
        return Ok(tally);
    };
    if args.profile_min_mentions == 0 {
        return Ok(tally);
    }
    let existing: Vec<ExistingProfile> = memories
        .iter()
        .filter(|m| m.status == MemoryStatus::Active)
        .filter_map(|m| {
            let entity_id = m.metadata.get(PROFILE_KEY)?.get("entity_id")?.as_str()?;
            Some(ExistingProfile {
                memory_id: m.id.clone(),
                entity_id: entity_id.to_string(),
                content: m.content.clone(),
            })
        })
        .collect();
    let subjects = match profile_subjects(args, index, agent, memories, &existing).await {
        Ok(read) => read,
        Err(error) => {
            tracing::warn!(agent = %agent, %error, "entity index unavailable; the sleep cycle writes no profiles this run");
            tally.skipped = Some(error.message);
            return Ok(tally);
        }
    };
    let (subjects, entity_ids) = subjects;
    let by_id: HashMap<&MemoryId, &Memory> = memories.iter().map(|m| (&m.id, m)).collect();
    for action in plan_profiles(&subjects, &existing, &entity_ids, args.profile_min_mentions) {
        let now = args.clock.now();
        match action {
            ProfileAction::Create {
                entity_id,
                key,
                name,
                content,
                as_of,
                sources,
            } => {
                let profile = Memory {
                    title: Some(format!("Profile: {name}")),
                    importance: 0.6,
                    tags: vec![crate::policy::profiles::PROFILE_TAG.to_string()],
                    metadata: serde_json::json!({
                        PROFILE_KEY: { "entity_id": entity_id, "key": key },
                        "derived_from": sources,
                        crate::model::PROVENANCE_KEY: { "surface": "sleep_cycle" },
                    }),
                    ..product_of_consolidation(agent, MemoryType::Semantic, content, as_of, now)
                };
                let _model_gate = args.vectors.hold().await;
                let embedding = args.vectors.embed_one(&profile.content).await?;
                let edges: Vec<Association> = sources
                    .iter()
                    .filter(|id| by_id.contains_key(id))
                    .map(|id| Association {
                        agent_id: agent.clone(),
                        from_id: profile.id.clone(),
                        to_id: id.clone(),
                        relation: "derived_from".into(),
                        weight: 0.5,
                        created_at: now,
                    })
                    .collect();
                let commit = ConsolidationCommit {
                    derived: StoredMemory::new(profile.clone(), embedding.clone()),
                    edges: edges.clone(),
                    sources: Vec::new(),
                };
                args.episodic
                    .commit_consolidation(std::slice::from_ref(&commit))
                    .await?;
                args.vectors
                    .project(&[index_entry(&profile, embedding)], &[])
                    .await;
                if !args.edges_in_store {
                    for edge in &edges {
                        args.graph.upsert(edge).await?;
                    }
                }
                tally.created.push(profile.id);
            }
            ProfileAction::Refresh {
                memory_id,
                content,
                as_of,
            } => {
                let Some(old) = by_id.get(&memory_id) else {
                    continue;
                };
                let patch = MemoryPatch {
                    content: Some(content),
                    ..Default::default()
                };
                let mut next = apply_patch(old, &patch, now);
                next.occurred_at = as_of;
                let _model_gate = args.vectors.hold().await;
                let embedding = args.vectors.embed_one(&next.content).await?;
                match args
                    .episodic
                    .update(
                        &next,
                        &version_of(old, "refresh_profile", now),
                        Some(&embedding),
                    )
                    .await
                {
                    Ok(()) => {
                        args.vectors
                            .project(&[index_entry(&next, embedding)], &[])
                            .await;
                        tally.refreshed.push(memory_id);
                    }
                    // Changed since it was read: the next run looks again.
                    Err(error) if is_race(&error) => {}
                    Err(error) => return Err(error),
                }
            }
            ProfileAction::Retire { memory_id } => {
                let Some(old) = by_id.get(&memory_id) else {
                    continue;
                };
                let patch = MemoryPatch {
                    status: Some(MemoryStatus::Archived),
                    ..Default::default()
                };
                let next = apply_patch(old, &patch, now);
                match args
                    .episodic
                    .update(&next, &version_of(old, "retire_profile", now), None)
                    .await
                {
                    Ok(()) => {
                        args.vectors
                            .project(&[], std::slice::from_ref(&memory_id))
                            .await;
                        tally.retired.push(memory_id);
                    }
                    Err(error) if is_race(&error) => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }
    Ok(tally)
}

/// The entities that may deserve a profile (of a profiled kind, named often enough or
/// profiled already), each with its merged aliases and its facts from memories
/// outside any project; and the ids of all the agent's entities.
async fn profile_subjects(
    args: &ConsolidatorArgs,
    index: &dyn crate::store::entities::EntityIndex,
    agent: &AgentId,
    memories: &[Memory],
    existing: &[crate::policy::profiles::ExistingProfile],
) -> MemoryResult<(
    Vec<crate::policy::profiles::ProfileSubject>,
    HashSet<String>,
)> {
    use crate::policy::profiles::{profiled_kind, ProfileSubject};
    use crate::store::entities::{EntityQuery, FactQuery};
    let profiled: HashSet<&str> = existing.iter().map(|p| p.entity_id.as_str()).collect();
    let outside_projects: HashSet<&MemoryId> = memories
        .iter()
        .filter(|m| m.project_id.is_none())
        .map(|m| &m.id)
        .collect();
    let mut entity_ids = HashSet::new();
    let mut wanted = Vec::new();
    let mut after_key = None;
    while entity_ids.len() < MAX_PROFILED_ENTITIES {
        let page = index
            .entities(&EntityQuery {
                agent_id: Some(agent.clone()),
                search: None,
                kind: None,
                after_key: after_key.clone(),
                limit: 500,
            })
            .await?;
        let full = page.len() == 500;
        after_key = page.last().map(|e| e.key.clone());
        for entity in page {
            entity_ids.insert(entity.id.clone());
            if profiled_kind(entity.kind)
                && (entity.mentions >= args.profile_min_mentions
                    || profiled.contains(entity.id.as_str()))
            {
                wanted.push(entity);
            }
        }
        if !full {
            break;
        }
    }
    let mut subjects = Vec::new();
    for entity in wanted {
        let claims = index
            .fact_claims(&FactQuery {
                agent_id: agent.clone(),
                subject_key: Some(entity.key.clone()),
                attribute: None,
                value_key: None,
                limit: 20_000,
            })
            .await?;
        let facts: Vec<_> = crate::policy::facts::timeline(&claims)
            .into_iter()
            .filter(|fact| fact.sources.iter().any(|id| outside_projects.contains(id)))
            .collect();
        let aliases = index
            .merges(agent, Some(&entity.key))
            .await?
            .into_iter()
            .filter(|m| m.undone_at.is_none() && m.name == entity.key)
            .map(|m| m.alias)
            .collect();
        subjects.push(ProfileSubject {
            entity,
            aliases,
            facts,
        });
    }
    Ok((subjects, entity_ids))
}
