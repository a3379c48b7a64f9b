//! MCP resources: an agent's memories as `mnemos://memories/{id}` (the memory object as
//! JSON) and `mnemos://memories/{id}/history` (its versions), listed newest first for
//! the connection's agent, a page at a time. Reads go through the contract like the
//! REST resources, so an agent sees only its own memories.

use mnemos_actors::error::{ErrorCode, MemoryError};
use mnemos_actors::Runtime;
use rmcp::model::{
    ErrorData, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use crate::auth::Caller;
use crate::contract::memories;
use crate::contract::wire::{AgentParam, ListParams, MemoryView};

/// The scheme and collection of memory URIs.
const PREFIX: &str = "mnemos://memories/";

/// Memories per page of `resources/list`.
const PAGE: usize = 50;

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A memory.
    Memory(String),
    /// A memory's version history.
    History(String),
}

/// Parse a resource URI; None when it is not one of this server's.
pub fn parse(uri: &str) -> Option<Named> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (id, history) = match rest.strip_suffix("/history") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    if id.is_empty() || id.contains('/') {
        return None;
    }
    Some(if history {
        Named::History(id.to_string())
    } else {
        Named::Memory(id.to_string())
    })
}

/// The URI of a memory.
pub fn uri(id: &str) -> String {
    format!("{PREFIX}{id}")
}

/// A memory as a listed resource: its first words as the name, its type and date as
/// the description.
fn listed(memory: &MemoryView) -> Resource {
    let name: String = memory.content.chars().take(60).collect();
    let name = if memory.content.chars().count() > 60 {
        format!("{name}…")
    } else {
        name
    };
    Resource::new(uri(&memory.id), name)
        .with_description(format!(
            "{} memory of {}, {}",
            memory.memory_type,
            memory.occurred_at.format("%Y-%m-%d"),
            memory.status
        ))
        .with_mime_type("application/json")
}

/// A contract error as MCP's: a missing memory is the spec's "resource not found"
/// (-32002), anything else the error table's code.
fn resource_error(error: MemoryError, uri: &str) -> ErrorData {
    match error.code {
        ErrorCode::NotFound => ErrorData::new(
            rmcp::model::ErrorCode(-32002),
            format!("no resource {uri}: {}", error.message),
            Some(serde_json::json!({"uri": uri})),
        ),
        _ => super::mcp_error(error),
    }
}

/// `resources/list`: the agent's memories, newest first; the cursor is the REST
/// list's `next_cursor`.
pub async fn list(
    runtime: &Runtime,
    caller: &Caller,
    agent: Option<String>,
    cursor: Option<String>,
) -> Result<ListResourcesResult, ErrorData> {
    let params = ListParams {
        agent_id: agent,
        limit: Some(PAGE),
        cursor,
        ..ListParams::default()
    };
    let page = memories::list_memories(runtime, caller, params)
        .await
        .map_err(super::mcp_error)?;
    let mut result =
        ListResourcesResult::with_all_items(page.memories.iter().map(listed).collect());
    result.next_cursor = page.next_cursor;
    Ok(result)
}

/// `resources/templates/list`: a memory and its history by id.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{PREFIX}{{id}}"), "memory")
            .with_description("One memory of this agent: the contract's memory object as JSON")
            .with_mime_type("application/json"),
        ResourceTemplate::new(format!("{PREFIX}{{id}}/history"), "memory history")
            .with_description("A memory's versions, oldest first, each with its reason")
            .with_mime_type("application/json"),
    ])
}

/// `resources/read`: the memory object, or its history, as JSON text.
pub async fn read(
    runtime: &Runtime,
    caller: &Caller,
    agent: Option<String>,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let named = parse(uri).ok_or_else(|| {
        ErrorData::invalid_params(
            format!("{uri:?} is not a resource of this server; resources are {PREFIX}{{id}} and {PREFIX}{{id}}/history"),
            Some(serde_json::json!({"field": "uri"})),
        )
    })?;
    let owner = AgentParam { agent_id: agent };
    let body = match named {
        Named::Memory(id) => serde_json::to_string_pretty(
            &memories::get_memory(runtime, caller, id, owner)
                .await
                .map_err(|e| resource_error(e, uri))?,
        ),
        Named::History(id) => serde_json::to_string_pretty(
            &memories::memory_history(runtime, caller, id, owner)
                .await
                .map_err(|e| resource_error(e, uri))?,
        ),
    }
    .map_err(|e| super::mcp_error(MemoryError::internal(e.to_string())))?;
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        body, uri,
    )
    .with_mime_type("application/json")]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_memory_or_its_history_and_nothing_else() {
        assert_eq!(
            parse("mnemos://memories/abc"),
            Some(Named::Memory("abc".into()))
        );
        assert_eq!(
            parse("mnemos://memories/abc/history"),
            Some(Named::History("abc".into()))
        );
        for other in [
            "mnemos://memories/",
            "mnemos://memories/a/b",
            "file:///etc/passwd",
            "mnemos://memories//history",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
        assert_eq!(uri("abc"), "mnemos://memories/abc");
    }
}
