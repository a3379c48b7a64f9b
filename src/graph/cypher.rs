//! The Cypher statements of the graph projections, shared by every Cypher backend
//! (FalkorDB through `GRAPH.QUERY`; Neo4j through Bolt), and the rendering of
//! parameters for FalkorDB's `CYPHER name=value … query` prefix.
//!
//! The projection's model: one `(:Memory {id, agent_id, type, status, shared,
//! session_id})` node per memory, one `-[:ASSOCIATED {relation, weight, agent_id}]->`
//! relationship per association, and one `(:MnemosProjection {id: 'outbox', applied})`
//! node recording the outbox sequence number applied through.

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
/// The lookup index on memory ids.
pub const INDEX_MEMORY_ID: &str = "CREATE INDEX FOR (m:Memory) ON (m.id)";
/// Counts, for health and tests: memories and associations of one agent.
pub const COUNT_AGENT: &str = "MATCH (m:Memory {agent_id: $agent_id}) \
     OPTIONAL MATCH (m)-[r:ASSOCIATED]->() RETURN count(DISTINCT m), count(r)";

/// Spreading activation over weighted variable-length paths from `$seed`, within
/// `depth` hops (rendered into the pattern: Cypher takes no parameter there), best
/// path first: a node's activation is the product of the weights along the path.
pub fn activation(depth: u32) -> String {
    format!(
        "MATCH p = (s:Memory {{id: $seed}})-[:ASSOCIATED*1..{}]-(m:Memory) \
         WHERE m.agent_id = $agent_id AND m.status = 'active' AND m.id <> $seed \
         WITH m, reduce(a = 1.0, r IN relationships(p) | a * r.weight) AS activation \
         RETURN m.id, max(activation) AS best ORDER BY best DESC LIMIT $limit",
        depth.clamp(1, 6)
    )
}

/// The statement and parameters that apply one outbox change.
pub fn change_query(change: &ProjectedChange) -> (&'static str, Vec<(&'static str, Param)>) {
    match change {
        ProjectedChange::UpsertMemory {
            id,
            agent_id,
            memory_type,
            status,
            shared,
            session_id,
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

    #[test]
    fn parameters_are_rendered_and_strings_escaped() {
        let query = with_params(
            "RETURN $a, $b",
            &[
                ("a", Param::Text("say \"hi\"\\ \n".into())),
                ("b", Param::Number(0.5)),
                ("c", Param::Null),
                ("d", Param::Bool(true)),
            ],
        );
        assert_eq!(
            query,
            r#"CYPHER a="say \"hi\"\\ \n" b=0.5 c=null d=true RETURN $a, $b"#
        );
        assert_eq!(with_params("RETURN 1", &[]), "RETURN 1");
    }

    #[test]
    fn activation_depth_is_bounded() {
        assert!(activation(0).contains("*1..1]"));
        assert!(activation(99).contains("*1..6]"));
    }
}
