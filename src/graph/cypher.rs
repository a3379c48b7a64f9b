//! The Cypher statements of the graph projections, shared by every Cypher backend
//! (FalkorDB through `GRAPH.QUERY`; Neo4j through Bolt), and the rendering of
//! parameters for FalkorDB's `CYPHER name=value … query` prefix.
//!
//! The projection's model: one `(:Memory {id, agent_id, type, status, shared,
//! session_id})` node per memory, one `-[:ASSOCIATED {relation, weight, agent_id}]->`
//! relationship per association, one `(:Entity {id, agent_id, key, name, kind})` node
//! per entity an active memory names with `(:Memory)-[:MENTIONS]->(:Entity)`, one
//! `(:Entity)-[:RELATES {attribute, memory_id, ends, agent_id}]->(:Entity)` per
//! relationship a memory states ("Bob works_at Acme"), and one
//! `(:MnemosProjection {id: 'outbox', applied})` node recording the outbox sequence
//! number applied through. Entity ids are the SQL entity index's, so both agree.

use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::store::ProjectedChange;

/// Create or update a memory's node.
pub const UPSERT_MEMORY: &str = "MERGE (m:Memory {id: $id}) \
     SET m.agent_id = $agent_id, m.type = $type, m.status = $status, m.shared = $shared, m.session_id = $session_id";
/// Delete a memory's node with its relationships.
pub const DELETE_MEMORY: &str = "MATCH (m:Memory {id: $id}) DETACH DELETE m";
/// Create or re-weight an association (creating bare end nodes if their upserts come later).
pub const UPSERT_EDGE: &str = "MERGE (a:Memory {id: $from_id}) MERGE (b:Memory {id: $to_id}) \
     MERGE (a)-[r:ASSOCIATED {relation: $relation}]->(b) SET r.weight = $weight, r.agent_id = $agent_id";
/// Remove an association.
pub const DELETE_EDGE: &str =
    "MATCH (:Memory {id: $from_id})-[r:ASSOCIATED {relation: $relation}]->(:Memory {id: $to_id}) DELETE r";
/// Record the outbox sequence number applied through.
pub const SET_APPLIED: &str = "MERGE (c:MnemosProjection {id: 'outbox'}) SET c.applied = $applied";
/// The outbox sequence number applied through (no row: nothing known).
pub const GET_APPLIED: &str = "MATCH (c:MnemosProjection {id: 'outbox'}) RETURN c.applied";
/// Remove everything.
pub const RESET: &str = "MATCH (n) DETACH DELETE n";
/// Create or update an entity a memory names and the memory's mention of it.
pub const UPSERT_MENTION: &str = "MATCH (m:Memory {id: $id}) \
     MERGE (e:Entity {id: $entity_id}) \
     ON CREATE SET e.name = $name \
     SET e.agent_id = $agent_id, e.key = $key, e.kind = $kind \
     MERGE (m)-[:MENTIONS]->(e)";
/// Drop a memory's mentions of entities not in `$keep`.
pub const DROP_MENTIONS: &str = "MATCH (m:Memory {id: $id})-[r:MENTIONS]->(e:Entity) \
     WHERE NOT e.id IN $keep DELETE r";
/// Drop each entity of `$agent_id` no memory mentions any more, with its relationships
/// (a statement of its own: FalkorDB applies a query's deletes at its end, so a filter
/// in the same query still sees the mentions it deletes).
pub const DROP_ORPHAN_ENTITIES: &str = "MATCH (e:Entity {agent_id: $agent_id}) \
     WHERE NOT ()-[:MENTIONS]->(e) DETACH DELETE e";
/// Drop the relationships a memory stated.
pub const DROP_RELATIONS: &str = "MATCH (:Entity)-[r:RELATES {memory_id: $id}]->(:Entity) DELETE r";
/// Record a relationship a memory states between two entities it names.
pub const UPSERT_RELATION: &str = "MATCH (a:Entity {id: $from_id}), (b:Entity {id: $to_id}) \
     MERGE (a)-[r:RELATES {attribute: $attribute, memory_id: $id}]->(b) \
     SET r.ends = $ends, r.agent_id = $agent_id";
/// The lookup index on entity ids.
pub const INDEX_ENTITY_ID: &str = "CREATE INDEX FOR (e:Entity) ON (e.id)";
/// The lookup index on entity owners (the orphan sweep).
pub const INDEX_ENTITY_AGENT: &str = "CREATE INDEX FOR (e:Entity) ON (e.agent_id)";
/// Counts, for health and tests: entities, mentions and relationships of one agent.
pub const COUNT_AGENT_ENTITIES: &str = "MATCH (e:Entity {agent_id: $agent_id}) \
     OPTIONAL MATCH ()-[m:MENTIONS]->(e) \
     OPTIONAL MATCH (e)-[r:RELATES]->() \
     RETURN count(DISTINCT e), count(DISTINCT m), count(DISTINCT r)";
/// The lookup index on memory ids.
pub const INDEX_MEMORY_ID: &str = "CREATE INDEX FOR (m:Memory) ON (m.id)";
/// Counts, for health and tests: memories and associations of one agent.
pub const COUNT_AGENT: &str = "MATCH (m:Memory {agent_id: $agent_id}) \
     OPTIONAL MATCH (m)-[r:ASSOCIATED]->() RETURN count(DISTINCT m), count(r)";

/// The associations of `$agent_id` touching any of `$seeds` (a list of ids), each once,
/// at most `$limit`: `from_id, to_id, relation, weight`.
pub const LINKS_AROUND: &str = "UNWIND $seeds AS seed \
     MATCH (s:Memory {id: seed})-[r:ASSOCIATED]-(:Memory) WHERE r.agent_id = $agent_id \
     WITH DISTINCT r \
     RETURN startNode(r).id AS from_id, endNode(r).id AS to_id, r.relation AS relation, r.weight AS weight \
     LIMIT $limit";

/// Spreading activation over weighted variable-length paths from `$seed` through
/// `$agent_id`'s associations, within `depth` hops (rendered into the pattern: Cypher
/// takes no parameter there). A path's activation is the product of `weight · $decay`
/// over its hops; each memory keeps its best path, returned as its ids joined by
/// commas (`path`). Best first, then by id, at most `$limit`; the same answer as
/// `policy::activation::spread` over the SQL graph.
pub fn activation(depth: u32) -> String {
    format!(
        "MATCH p = (s:Memory {{id: $seed}})-[:ASSOCIATED*1..{}]-(m:Memory) \
         WHERE m.id <> $seed AND all(r IN relationships(p) WHERE r.agent_id = $agent_id) \
         WITH m, reduce(a = 1.0, r IN relationships(p) | a * r.weight * $decay) AS activation, \
              reduce(t = '', n IN nodes(p) | t + n.id + ',') AS path \
         ORDER BY activation DESC, path \
         WITH m, collect([activation, path])[0] AS best \
         RETURN m.id AS id, best[0] AS activation, best[1] AS path \
         ORDER BY activation DESC, id LIMIT $limit",
        depth.clamp(1, 6)
    )
}

/// The parameters of [`LINKS_AROUND`].
pub fn links_params(
    agent: &AgentId,
    seeds: &[MemoryId],
    limit: usize,
) -> Vec<(&'static str, Param)> {
    vec![
        (
            "seeds",
            Param::TextList(seeds.iter().map(|s| s.0.clone()).collect()),
        ),
        ("agent_id", Param::Text(agent.to_string())),
        ("limit", Param::Int(limit as i64)),
    ]
}

/// The parameters of [`activation`].
pub fn activation_params(
    agent: &AgentId,
    seed: &MemoryId,
    decay: f64,
    limit: usize,
) -> Vec<(&'static str, Param)> {
    vec![
        ("seed", Param::Text(seed.0.clone())),
        ("agent_id", Param::Text(agent.to_string())),
        ("decay", Param::Number(decay)),
        ("limit", Param::Int(limit as i64)),
    ]
}

/// The ids of a path returned by [`activation`].
pub fn path_ids(joined: &str) -> Vec<MemoryId> {
    joined
        .split(',')
        .filter(|id| !id.is_empty())
        .map(|id| MemoryId(id.to_string()))
        .collect()
}

/// Statements and parameters, in order, that apply one outbox change: the memory's
/// or edge's own statement ([`change_query`]) and, for a projection keeping entities,
/// the memory's mentions and relationships (before a delete, so its entities are
/// dropped with its last mention; after an upsert, so the memory node exists).
pub fn change_queries(change: &ProjectedChange) -> Vec<(&'static str, Vec<(&'static str, Param)>)> {
    let main = change_query(change);
    match change {
        ProjectedChange::UpsertMemory {
            id,
            agent_id,
            named: Some(named),
            ..
        } => {
            let memory = || ("id", Param::Text(id.0.clone()));
            let agent = || ("agent_id", Param::Text(agent_id.to_string()));
            let mut out = vec![main];
            for entity in &named.entities {
                out.push((
                    UPSERT_MENTION,
                    vec![
                        memory(),
                        agent(),
                        ("entity_id", Param::Text(entity.id.clone())),
                        ("key", Param::Text(entity.key.clone())),
                        ("name", Param::Text(entity.name.clone())),
                        ("kind", Param::Text(entity.kind.clone())),
                    ],
                ));
            }
            out.push((
                DROP_MENTIONS,
                vec![
                    memory(),
                    (
                        "keep",
                        Param::TextList(named.entities.iter().map(|e| e.id.clone()).collect()),
                    ),
                ],
            ));
            out.push((DROP_RELATIONS, vec![memory()]));
            for relation in &named.relations {
                out.push((
                    UPSERT_RELATION,
                    vec![
                        memory(),
                        agent(),
                        ("from_id", Param::Text(relation.from_id.clone())),
                        ("to_id", Param::Text(relation.to_id.clone())),
                        ("attribute", Param::Text(relation.attribute.clone())),
                        ("ends", Param::Bool(relation.ends)),
                    ],
                ));
            }
            out
        }
        ProjectedChange::DeleteMemory { id, .. } => vec![
            (DROP_RELATIONS, vec![("id", Param::Text(id.0.clone()))]),
            (
                DROP_MENTIONS,
                vec![
                    ("id", Param::Text(id.0.clone())),
                    ("keep", Param::TextList(Vec::new())),
                ],
            ),
            main,
        ],
        _ => vec![main],
    }
}

/// The statements that apply a batch of changes in order, then drop the entities the
/// batch left without mentions (one sweep per agent whose memories it touched).
pub fn batch_queries(
    changes: &[ProjectedChange],
) -> Vec<(&'static str, Vec<(&'static str, Param)>)> {
    let mut out: Vec<_> = changes.iter().flat_map(change_queries).collect();
    let mut swept: Vec<&AgentId> = Vec::new();
    for change in changes {
        let agent = match change {
            ProjectedChange::UpsertMemory {
                agent_id,
                named: Some(_),
                ..
            }
            | ProjectedChange::DeleteMemory { agent_id, .. } => agent_id,
            _ => continue,
        };
        if !swept.contains(&agent) {
            swept.push(agent);
        }
    }
    for agent in swept {
        out.push((
            DROP_ORPHAN_ENTITIES,
            vec![("agent_id", Param::Text(agent.to_string()))],
        ));
    }
    out
}

/// The memory's or edge's own statement and parameters of one outbox change.
pub fn change_query(change: &ProjectedChange) -> (&'static str, Vec<(&'static str, Param)>) {
    match change {
        ProjectedChange::UpsertMemory {
            id,
            agent_id,
            memory_type,
            status,
            shared,
            session_id,
            embedding: _,
            named: _,
        } => (
            UPSERT_MEMORY,
            vec![
                ("id", Param::Text(id.0.clone())),
                ("agent_id", Param::Text(agent_id.to_string())),
                ("type", Param::Text(memory_type.clone())),
                ("status", Param::Text(status.clone())),
                ("shared", Param::Bool(*shared)),
                (
                    "session_id",
                    session_id.clone().map_or(Param::Null, Param::Text),
                ),
            ],
        ),
        ProjectedChange::DeleteMemory { id, .. } => {
            (DELETE_MEMORY, vec![("id", Param::Text(id.0.clone()))])
        }
        ProjectedChange::UpsertEdge {
            agent_id,
            from_id,
            to_id,
            relation,
            weight,
        } => (
            UPSERT_EDGE,
            vec![
                ("from_id", Param::Text(from_id.0.clone())),
                ("to_id", Param::Text(to_id.0.clone())),
                ("relation", Param::Text(relation.clone())),
                ("weight", Param::Number(f64::from(*weight))),
                ("agent_id", Param::Text(agent_id.to_string())),
            ],
        ),
        ProjectedChange::DeleteEdge {
            from_id,
            to_id,
            relation,
            ..
        } => (
            DELETE_EDGE,
            vec![
                ("from_id", Param::Text(from_id.0.clone())),
                ("to_id", Param::Text(to_id.0.clone())),
                ("relation", Param::Text(relation.clone())),
            ],
        ),
    }
}

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A string (quoted and escaped when rendered).
    Text(String),
    /// A number.
    Number(f64),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// Null.
    Null,
    /// A list of strings.
    TextList(Vec<String>),
}

impl Param {
    fn render(&self) -> String {
        match self {
            Param::Text(text) => {
                let mut out = String::with_capacity(text.len() + 2);
                out.push('"');
                for c in text.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c => out.push(c),
                    }
                }
                out.push('"');
                out
            }
            Param::Number(n) if n.is_finite() => format!("{n:?}"),
            Param::Number(_) => "0.0".into(),
            Param::Int(i) => i.to_string(),
            Param::Bool(b) => b.to_string(),
            Param::Null => "null".into(),
            Param::TextList(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(|item| Param::Text(item.clone()).render())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// `query` with FalkorDB's parameter prefix: `CYPHER a=1 b="x" <query>`.
pub fn with_params(query: &str, params: &[(&str, Param)]) -> String {
    if params.is_empty() {
        return query.to_string();
    }
    let rendered: Vec<String> = params
        .iter()
        .map(|(name, value)| format!("{name}={}", value.render()))
        .collect();
    format!("CYPHER {} {query}", rendered.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemos_actors::store::entities::{NamedEntity, NamedInMemory, NamedRelation};

    #[test]
    fn a_batch_writes_mentions_after_the_memory_and_sweeps_orphans_once_per_agent() {
        let agent = AgentId::parse("ana").unwrap();
        let entity = |id: &str| NamedEntity {
            id: id.into(),
            key: id.into(),
            name: id.into(),
            kind: "name".into(),
        };
        let upsert = ProjectedChange::UpsertMemory {
            id: MemoryId("m1".into()),
            agent_id: agent.clone(),
            memory_type: "semantic".into(),
            status: "active".into(),
            shared: false,
            session_id: None,
            embedding: None,
            named: Some(NamedInMemory {
                entities: vec![entity("e1"), entity("e2")],
                relations: vec![NamedRelation {
                    from_id: "e1".into(),
                    to_id: "e2".into(),
                    attribute: "works_at".into(),
                    ends: false,
                }],
            }),
        };
        let delete = ProjectedChange::DeleteMemory {
            id: MemoryId("m2".into()),
            agent_id: agent.clone(),
        };
        let order: Vec<&str> = batch_queries(&[upsert, delete])
            .into_iter()
            .map(|(query, _)| query)
            .collect();
        assert_eq!(
            order,
            [
                UPSERT_MEMORY,
                UPSERT_MENTION,
                UPSERT_MENTION,
                DROP_MENTIONS,
                DROP_RELATIONS,
                UPSERT_RELATION,
                DROP_RELATIONS,
                DROP_MENTIONS,
                DELETE_MEMORY,
                DROP_ORPHAN_ENTITIES,
            ]
        );
        // A projection that keeps no entities (named: None) gets the memory alone.
        let bare = ProjectedChange::UpsertMemory {
            id: MemoryId("m3".into()),
            agent_id: agent,
            memory_type: "semantic".into(),
            status: "active".into(),
            shared: false,
            session_id: None,
            embedding: None,
            named: None,
        };
        assert_eq!(batch_queries(&[bare]).len(), 1);
    }

    #[test]
    fn parameters_are_rendered_and_strings_escaped() {
        let query = with_params(
            "RETURN $a, $b",
            &[
                ("a", Param::Text("say \"hi\"\\ \n".into())),
                ("b", Param::Number(0.5)),
                ("c", Param::Null),
                ("d", Param::Bool(true)),
                ("e", Param::TextList(vec!["x".into(), "y\"".into()])),
            ],
        );
        assert_eq!(
            query,
            r#"CYPHER a="say \"hi\"\\ \n" b=0.5 c=null d=true e=["x", "y\""] RETURN $a, $b"#
        );
        assert_eq!(with_params("RETURN 1", &[]), "RETURN 1");
    }

    #[test]
    fn activation_depth_is_bounded() {
        assert!(activation(0).contains("*1..1]"));
        assert!(activation(99).contains("*1..6]"));
    }

    #[test]
    fn paths_split_into_ids() {
        let ids = path_ids("a,b,c,");
        assert_eq!(
            ids.iter().map(|id| id.0.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert!(path_ids("").is_empty());
    }
}
