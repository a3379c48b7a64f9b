//! `POST /v1/responses` (OpenAI's Responses API) with memory: the block joins the
//! request's `instructions`, which the API puts before the conversation as its system
//! message, so the caller's `input` items reach the model unchanged.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use mnemos_actors::error::MemoryError;
use serde_json::Value;

use super::{
    authenticated, content_text, encode, exchange_upstream, json_object, mnemos_headers, plan,
    recall_block, stream, user_field, ProxyState,
};
use crate::auth::{Caller, Scope};
use crate::contract::errors::ApiError;

/// The latest user text of a Responses request's `input`: the string itself, or the
/// last item with role `user` (an easy message or a `message` item, its content a
/// string or `input_text` parts).
pub fn latest_user_input(input: &Value) -> Option<String> {
    let text = match input {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .rev()
            .filter(|item| {
                item.get("type")
                    .and_then(Value::as_str)
                    .is_none_or(|kind| kind == "message")
            })
            .find(|item| item.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|item| item.get("content"))
            .map(content_text)?,
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// Put `block` into the request's `instructions` (after what the caller wrote).
pub fn inject_instructions(request: &mut serde_json::Map<String, Value>, block: &str) {
    let instructions = match request.get("instructions") {
        Some(Value::String(text)) if !text.trim().is_empty() => format!("{text}\n\n{block}"),
        _ => block.to_string(),
    };
    request.insert("instructions".into(), Value::String(instructions));
}

/// The assistant's text in a (non-streamed) response: the `output_text` parts of its
/// `message` output items, joined.
pub fn response_text(body: &Value) -> Option<String> {
    let text: Vec<&str> = body
        .get("output")?
        .as_array()?
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
        .filter_map(|item| item.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|part| part.get("type").and_then(Value::as_str) == Some("output_text"))
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect();
    let text = text.concat();
    (!text.is_empty()).then_some(text)
}

/// `POST /v1/responses`: the memory proxy for the Responses API.
pub(super) async fn responses(
    State(state): State<Arc<ProxyState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticated(caller)?;
    caller.require(Scope::Read)?;
    caller.require(Scope::Write)?;
    let proxy = &state.proxy;
    let url = proxy.upstream("responses")?;
    let mut request = json_object(&body, "responses")?;
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let latest =
        match request.get("input") {
            Some(input @ (Value::String(_) | Value::Array(_))) => latest_user_input(input),
            _ => return Err(ApiError(MemoryError::invalid(
                "input",
                "input is required: a string, or an array of input items such as {role, content}",
            ))),
        };
    if request
        .get("instructions")
        .is_some_and(|i| !i.is_string() && !i.is_null())
    {
        return Err(ApiError(MemoryError::invalid(
            "instructions",
            "instructions must be a string",
        )));
    }
    let plan = plan(
        &proxy.settings,
        &caller,
        &headers,
        user_field(&request),
        latest,
    )?;
    let (injection, block) = recall_block(&state.runtime, &plan).await;
    if let Some(block) = block {
        inject_instructions(&mut request, &block);
    }
    let forward = proxy.post(&url, &headers, encode(&request)?, streaming);
    let mut response = exchange_upstream(
        &state,
        &plan,
        forward,
        streaming,
        stream::Dialect::Responses,
    )
    .await?;
    mnemos_headers(&mut response, &plan, &injection);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_latest_user_input_is_the_query() {
        assert_eq!(
            latest_user_input(&json!("Where is billing?")).as_deref(),
            Some("Where is billing?")
        );
        let items = json!([
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "second"},
                {"type": "input_image", "image_url": "x"}]},
            {"type": "function_call_output", "call_id": "c", "output": "42"},
        ]);
        assert_eq!(latest_user_input(&items).as_deref(), Some("second"));
        assert_eq!(latest_user_input(&json!([])), None);
        assert_eq!(latest_user_input(&json!("  ")), None);
    }

    #[test]
    fn memory_joins_the_instructions() {
        let mut request = json!({"input": "hi"}).as_object().unwrap().clone();
        inject_instructions(&mut request, "<memory>x</memory>");
        assert_eq!(request["instructions"], "<memory>x</memory>");
        let mut request = json!({"input": "hi", "instructions": "Be brief."})
            .as_object()
            .unwrap()
            .clone();
        inject_instructions(&mut request, "<memory>x</memory>");
        assert_eq!(request["instructions"], "Be brief.\n\n<memory>x</memory>");
    }

    #[test]
    fn response_text_joins_the_output_text_parts() {
        let body = json!({"output": [
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "Port "},
                {"type": "output_text", "text": "8443."}]}
        ]});
        assert_eq!(response_text(&body).as_deref(), Some("Port 8443."));
        assert_eq!(response_text(&json!({"output": []})), None);
    }
}
