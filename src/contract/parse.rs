//! Parsing of wire input into domain values, with the contract's rules: every failure
//! is `invalid_argument` naming the field at fault. REST, MCP, the proxy and the CLI
//! all parse through these functions, so one input means one thing everywhere.

use chrono::{DateTime, Datelike, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryStatus, MemoryType, SessionId};
use mnemos_actors::policy::time::TimeRange;
use mnemos_actors::projects::ProjectId;
use serde::de::DeserializeOwned;

/// Parse an already-decoded JSON value (an MCP tool's arguments, a REST body) into a
/// wire request: unknown fields, missing fields and wrong types are `invalid_argument`
/// naming the field.
pub fn from_json_value<T: DeserializeOwned>(value: serde_json::Value) -> MemoryResult<T> {
    serde_path_to_error::deserialize(value).map_err(json_error)
}

/// Parse a JSON body from bytes with the same rules as [`from_json_value`].
pub fn from_json_slice<T: DeserializeOwned>(bytes: &[u8]) -> MemoryResult<T> {
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(json_error)
}

/// The contract's error for a body that did not deserialize, naming the field at fault.
fn json_error(error: serde_path_to_error::Error<serde_json::Error>) -> MemoryError {
    let path = error.path().to_string();
    let inner = error.into_inner();
    let message = inner.to_string();
    let field = if path == "." || path == "?" || path.is_empty() {
        // serde names missing/unknown fields in the message: lift the name out.
        message.split('`').nth(1).unwrap_or("body").to_string()
    } else {
        path
    };
    let (field, message) = match inner.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => (
            "body".to_string(),
            format!("the body is not valid JSON: {message}"),
        ),
        serde_json::error::Category::Io | serde_json::error::Category::Data => {
            (field.clone(), format!("{field}: {message}"))
        }
    };
    MemoryError::invalid(field, message)
}

/// Parse a query string into a wire request; the error names the parameter at fault.
pub fn from_query<T: DeserializeOwned>(query: &str) -> MemoryResult<T> {
    let pairs = form_urlencoded_pairs(query);
    let deserializer = serde_urlencoded::Deserializer::new(pairs);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let message = error.inner().to_string();
        // The parameter at fault: its path when serde knows it, else the one a message
        // quotes (`unknown field `x``), else the query as a whole.
        let path = error.path().to_string();
        let field = if path != "." && !path.is_empty() {
            path
        } else {
            message.split('`').nth(1).unwrap_or("query").to_string()
        };
        let hint = if is_time_parameter(&field) {
            " (an RFC 3339 time such as 2024-05-01T09:30:00Z)"
        } else {
            ""
        };
        MemoryError::invalid(
            field.clone(),
            format!("{field} is not valid: {message}{hint}"),
        )
    })
}

/// Whether a query parameter holds an instant (its message then shows the form).
fn is_time_parameter(field: &str) -> bool {
    field == "now"
        || field.ends_with("_after")
        || field.ends_with("_before")
        || field.ends_with("_at")
}

/// The `key=value` pairs of a query string, percent-decoded.
fn form_urlencoded_pairs(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// Parse an agent id field (`agent_id`).
pub fn agent(raw: &str) -> MemoryResult<AgentId> {
    AgentId::parse(raw)
}

/// Parse an optional agent id (an owner that is checked when given).
pub fn optional_agent(raw: Option<&str>) -> MemoryResult<Option<AgentId>> {
    raw.map(agent).transpose()
}

/// Parse an optional session id; the error names `field` (`memories[3].session_id`).
pub fn session(field: &str, raw: Option<&str>) -> MemoryResult<Option<SessionId>> {
    raw.map(|s| {
        SessionId::parse(s).map_err(|mut e| {
            e.field = Some(field.to_string());
            e.message = e.message.replace("session_id", field);
            e
        })
    })
    .transpose()
}

/// Parse an optional project id field named `field`.
pub fn project(field: &str, raw: Option<&str>) -> MemoryResult<Option<ProjectId>> {
    raw.map(|p| ProjectId::parse_field(field, p)).transpose()
}

/// Parse an optional memory type field named `field`.
pub fn memory_type(field: &str, raw: Option<&str>) -> MemoryResult<Option<MemoryType>> {
    raw.map(|t| MemoryType::parse(field, t)).transpose()
}

/// Parse a list of memory types, each error naming `field`.
pub fn memory_types(field: &str, raw: &[String]) -> MemoryResult<Vec<MemoryType>> {
    raw.iter().map(|t| MemoryType::parse(field, t)).collect()
}

/// Parse an optional memory status field named `field`.
pub fn memory_status(field: &str, raw: Option<&str>) -> MemoryResult<Option<MemoryStatus>> {
    raw.map(|s| MemoryStatus::parse(field, s)).transpose()
}

/// Recall's `min_score`: a number from 0 to 1.
pub fn min_score(raw: Option<f64>) -> MemoryResult<Option<f64>> {
    match raw {
        Some(value) if !(0.0..=1.0).contains(&value) => Err(MemoryError::invalid(
            "min_score",
            format!("min_score must be between 0 and 1 (scores are on 0..1); got {value}"),
        )),
        other => Ok(other),
    }
}

/// The words of a full-text filter (`field`), lowercased; none for an absent or blank
/// text. At most 16 words of at most 200 bytes each.
pub fn search_words(field: &str, raw: Option<&str>) -> MemoryResult<Vec<String>> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let words: Vec<String> = raw
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.len() > 16 || words.iter().any(|w| w.len() > 200) {
        return Err(MemoryError::invalid(
            field,
            format!("{field} may hold at most 16 words of at most 200 bytes each"),
        ));
    }
    if words.iter().any(|w| w.contains('\0')) {
        return Err(MemoryError::invalid(
            field,
            format!("{field} must not contain NUL characters"),
        ));
    }
    Ok(words)
}

/// The occurrence range of `occurred_after` (inclusive) and `occurred_before`
/// (exclusive); none when neither is given.
pub fn occurred_between(
    after: Option<DateTime<Utc>>,
    before: Option<DateTime<Utc>>,
) -> MemoryResult<Option<TimeRange>> {
    if after.is_none() && before.is_none() {
        return Ok(None);
    }
    let start = after.unwrap_or(DateTime::<Utc>::MIN_UTC);
    let end = before.unwrap_or(DateTime::<Utc>::MAX_UTC);
    if start >= end {
        return Err(MemoryError::invalid(
            "occurred_before",
            "occurred_before must come after occurred_after",
        ));
    }
    Ok(Some(TimeRange { start, end }))
}

/// A required string that arrives in an optional wire field (query parameters).
pub fn required(field: &str, value: Option<String>) -> MemoryResult<String> {
    value.ok_or_else(|| MemoryError::invalid(field, format!("{field} is required")))
}

/// Check a request's reference time: calendar arithmetic near chrono's limits would
/// overflow, so only the years 1..=9999 are accepted.
pub fn reference_time(now: Option<DateTime<Utc>>) -> MemoryResult<Option<DateTime<Utc>>> {
    if let Some(now) = now {
        if !(1..=9999).contains(&now.year()) {
            return Err(MemoryError::invalid(
                "now",
                format!("now {now} is outside the years 1 to 9999"),
            ));
        }
    }
    Ok(now)
}

/// Parse an optional `time_query` (`last week`, `in May 2023`, ...) relative to `now`.
pub fn time_query(raw: Option<&str>, now: DateTime<Utc>) -> MemoryResult<Option<TimeRange>> {
    raw.map(|q| {
        mnemos_actors::policy::time::parse_time_query(q, now)
            .map_err(|message| MemoryError::invalid("time_query", message))
    })
    .transpose()
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::contract::wire::{RecallBody, RememberBatchBody, RememberBody};
    use proptest::prelude::*;

    /// Arbitrary JSON, shaped like the bodies clients send (objects of the contract's
    /// field names with values of every kind).
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(|f| serde_json::json!(f)),
            any::<String>().prop_map(serde_json::Value::from),
            "(-?[0-9]{1,6}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z|last week|in May 2023|\\+10000-01-01T00:00:00Z)"
                .prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("agent_id".to_string()),
                        Just("content".to_string()),
                        Just("query".to_string()),
                        Just("occurred_at".to_string()),
                        Just("time_query".to_string()),
                        Just("importance".to_string()),
                        Just("tags".to_string()),
                        Just("type".to_string()),
                        Just("memories".to_string()),
                        Just("limit".to_string()),
                        Just("now".to_string()),
                        Just("metadata".to_string()),
                        "[a-z_]{1,8}",
                    ],
                    inner,
                    0..6,
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever JSON arrives, parsing a body and turning it into a runtime input is
        /// a value or an `invalid_argument` (or `payload_too_large`) naming a field:
        /// never a panic, never another code.
        #[test]
        fn any_body_parses_or_is_refused_naming_a_field(value in json_value()) {
            let refused = |e: mnemos_actors::error::MemoryError| {
                matches!(e.code, mnemos_actors::error::ErrorCode::InvalidArgument | mnemos_actors::error::ErrorCode::PayloadTooLarge)
                    && !e.message.is_empty()
            };
            match from_json_value::<RememberBody>(value.clone()) {
                Ok(body) => {
                    let (_, item) = body.into_parts();
                    if let Err(e) = item.into_input("") {
                        prop_assert!(refused(e.clone()), "{e:?}");
                        prop_assert!(e.field.is_some(), "{e:?}");
                    }
                }
                Err(e) => prop_assert!(refused(e)),
            }
            match from_json_value::<RememberBatchBody>(value.clone()) {
                Ok(body) => {
                    for (i, item) in body.memories.into_iter().enumerate() {
                        if let Err(e) = item.into_input(&format!("memories[{i}].")) {
                            prop_assert!(refused(e.clone()), "{e:?}");
                        }
                    }
                }
                Err(e) => prop_assert!(refused(e)),
            }
            match from_json_value::<RecallBody>(value) {
                Ok(body) => {
                    let now = chrono::Utc::now();
                    if let Err(e) = time_query(body.time_query.as_deref(), now) {
                        prop_assert!(refused(e.clone()) && e.field.is_some(), "{e:?}");
                    }
                    if let Err(e) = reference_time(body.now) {
                        prop_assert!(refused(e), "now");
                    }
                }
                Err(e) => prop_assert!(refused(e)),
            }
        }

        /// Query strings too: any of them is a value or a named refusal.
        #[test]
        fn any_query_string_parses_or_is_refused(query in "[a-z_=&%0-9.+-]{0,60}") {
            if let Err(e) = from_query::<crate::contract::wire::ListParams>(&query) {
                prop_assert_eq!(e.code, mnemos_actors::error::ErrorCode::InvalidArgument);
            }
        }
    }
}
