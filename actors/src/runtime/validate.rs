//! Input checks shared by the runtime's operations. Every failure is a typed error
//! naming the field at fault and the limit (with its configuration key) it broke.

use crate::error::{MemoryError, MemoryResult};
use crate::model::{check_instant, AgentId, MemoryId};

use super::config::Limits;
use super::remember::RememberInput;

/// Longest `source.path` in bytes (a path longer than any file system allows is a mistake).
const MAX_SOURCE_PATH_BYTES: usize = 4096;

/// Text every store can keep: PostgreSQL refuses the NUL character in text and JSON,
/// so both backends refuse it alike, as a 400 naming the field, before anything is
/// written (a backend error would read as an outage and be retried forever).
pub(super) fn storable_text(field: &str, text: &str) -> MemoryResult<()> {
    if text.contains('\0') {
        return Err(MemoryError::invalid(
            field,
            format!("{field} contains a NUL character (\\u0000), which cannot be stored"),
        ));
    }
    Ok(())
}

/// [`storable_text`] for every key and string inside a JSON value.
pub(super) fn storable_json(field: &str, value: &serde_json::Value) -> MemoryResult<()> {
    match value {
        serde_json::Value::String(text) => storable_text(field, text),
        serde_json::Value::Array(items) => items.iter().try_for_each(|v| storable_json(field, v)),
        serde_json::Value::Object(map) => map.iter().try_for_each(|(key, v)| {
            storable_text(field, key)?;
            storable_json(field, v)
        }),
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            Ok(())
        }
    }
}

/// Check one memory to remember against `limits`; errors name the field under `prefix`
/// (`memories[3].` in a batch).
pub(super) fn remember_input(
    limits: &Limits,
    input: &RememberInput,
    prefix: &str,
) -> MemoryResult<()> {
    let field = |name: &str| format!("{prefix}{name}");
    if let Some(at) = input.occurred_at {
        check_instant(&field("occurred_at"), at)?;
    }
    if input.content.trim().is_empty() {
        return Err(MemoryError::invalid(
            field("content"),
            "content must not be empty",
        ));
    }
    storable_text(&field("content"), &input.content)?;
    if input.content.len() > limits.max_content_bytes {
        return Err(MemoryError::too_large(
            field("content"),
            format!(
                "content is {} bytes; the limit is {} (limits.max_content_bytes)",
                input.content.len(),
                limits.max_content_bytes
            ),
        ));
    }
    if let Some(importance) = input.importance {
        if !(0.0..=1.0).contains(&importance) || importance.is_nan() {
            return Err(MemoryError::invalid(
                field("importance"),
                "importance must be between 0 and 1",
            ));
        }
    }
    if let Some(valence) = input.valence {
        if !(-1.0..=1.0).contains(&valence) || valence.is_nan() {
            return Err(MemoryError::invalid(
                field("valence"),
                "valence must be between -1 and 1",
            ));
        }
    }
    if let Some(arousal) = input.arousal {
        if !(0.0..=1.0).contains(&arousal) || arousal.is_nan() {
            return Err(MemoryError::invalid(
                field("arousal"),
                "arousal must be between 0 and 1",
            ));
        }
    }
    tags(&input.tags, limits, &field("tags"))?;
    if let Some(title) = &input.title {
        if title.len() > 1024 {
            return Err(MemoryError::invalid(
                field("title"),
                "title must be at most 1024 bytes",
            ));
        }
        storable_text(&field("title"), title)?;
    }
    if let Some(value) = &input.metadata {
        metadata(value, limits, &field("metadata"))?;
    }
    if let Some(source) = &input.source {
        if source.path.is_empty() || source.hash.is_empty() {
            return Err(MemoryError::invalid(
                field("source"),
                "source needs a non-empty path and hash",
            ));
        }
        if source.path.len() > MAX_SOURCE_PATH_BYTES || source.hash.len() > 256 {
            return Err(MemoryError::invalid(
                field("source"),
                format!(
                    "source.path is at most {MAX_SOURCE_PATH_BYTES} bytes and source.hash at most 256"
                ),
            ));
        }
        storable_text(&field("source.path"), &source.path)?;
        storable_text(&field("source.hash"), &source.hash)?;
    }
    Ok(())
}

/// A page size is 1 to `limits.max_result_limit`.
pub(super) fn limit(limits: &Limits, limit: usize) -> MemoryResult<()> {
    let max = limits.max_result_limit;
    if limit == 0 || limit > max {
        return Err(MemoryError::invalid(
            "limit",
            format!("limit must be between 1 and {max} (limits.max_result_limit)"),
        ));
    }
    Ok(())
}

/// A query is not blank and at most `limits.max_content_bytes`.
pub(super) fn query(limits: &Limits, query: &str) -> MemoryResult<()> {
    if query.trim().is_empty() {
        return Err(MemoryError::invalid("query", "query must not be empty"));
    }
    storable_text("query", query)?;
    if query.len() > limits.max_content_bytes {
        return Err(MemoryError::too_large(
            "query",
            format!("query is longer than {} bytes", limits.max_content_bytes),
        ));
    }
    Ok(())
}

/// The not-found error of a memory, naming the agent it was looked up for.
pub(super) fn not_found(id: &MemoryId, agent: Option<&AgentId>) -> MemoryError {
    let message = match agent {
        Some(agent) => format!("memory {id} does not exist for agent {agent}"),
        None => format!("memory {id} does not exist"),
    };
    MemoryError {
        field: Some("id".into()),
        ..MemoryError::not_found(message)
    }
}

/// A not-found `error` attributed to `field`, the request field that named the id (other
/// failures, such as a backend outage, are no field's fault and are left alone).
pub(super) fn with_field(mut error: MemoryError, field: &str) -> MemoryError {
    if error.code == crate::error::ErrorCode::NotFound {
        error.field = Some(field.to_string());
    }
    error
}

/// At most `limits.max_tags` tags, each 1 to `limits.max_tag_bytes` bytes and not blank.
pub(super) fn tags(tags: &[String], limits: &Limits, field: &str) -> MemoryResult<()> {
    if tags.len() > limits.max_tags {
        return Err(MemoryError::invalid(
            field,
            format!("at most {} tags are allowed", limits.max_tags),
        ));
    }
    if let Some(bad) = tags
        .iter()
        .find(|t| t.trim().is_empty() || t.len() > limits.max_tag_bytes || t.contains('\0'))
    {
        return Err(MemoryError::invalid(
            field,
            format!(
                "tag {bad:?} must be 1 to {} bytes, not blank and without NUL characters",
                limits.max_tag_bytes
            ),
        ));
    }
    Ok(())
}

/// A JSON object of at most `limits.max_metadata_bytes` bytes (the client's part: the
/// keys the server writes, provenance and screening, do not count).
pub(super) fn metadata(
    metadata: &serde_json::Value,
    limits: &Limits,
    field: &str,
) -> MemoryResult<()> {
    if !metadata.is_object() {
        return Err(MemoryError::invalid(
            field,
            "metadata must be a JSON object",
        ));
    }
    storable_json(field, metadata)?;
    let size = match metadata.as_object() {
        Some(map)
            if map.contains_key(crate::model::PROVENANCE_KEY)
                || map.contains_key(crate::policy::screening::METADATA_KEY) =>
        {
            let mut own = map.clone();
            own.remove(crate::model::PROVENANCE_KEY);
            own.remove(crate::policy::screening::METADATA_KEY);
            serde_json::Value::Object(own).to_string().len()
        }
        _ => metadata.to_string().len(),
    };
    if size > limits.max_metadata_bytes {
        return Err(MemoryError::too_large(
            field,
            format!(
                "metadata is {size} bytes; the limit is {} (limits.max_metadata_bytes)",
                limits.max_metadata_bytes
            ),
        ));
    }
    Ok(())
}
