//! `POST /v1/chat/completions` with memory: the block joins the system message.

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

/// The latest user message of a chat request, if any.
pub fn latest_user_message(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
        .map(content_text)
        .filter(|text| !text.trim().is_empty())
}

/// Put `block` into the request's system message: appended to the first system (or
/// developer) message when there is one, else as a new system message in front.
pub fn inject_memory(messages: &mut Vec<Value>, block: &str) {
    let system = messages.iter_mut().find(|m| {
        matches!(
            m.get("role").and_then(Value::as_str),
            Some("system" | "developer")
        )
    });
    match system.and_then(|m| m.as_object_mut()) {
        Some(message) => match message.get_mut("content") {
            Some(Value::String(text)) => {
                text.push_str("\n\n");
                text.push_str(block);
            }
            Some(Value::Array(parts)) => {
                parts.push(serde_json::json!({"type": "text", "text": block}));
            }
            _ => {
                message.insert("content".into(), Value::String(block.to_string()));
            }
        },
        None => messages.insert(0, serde_json::json!({"role": "system", "content": block})),
    }
}

/// The assistant's text in a (non-streamed) chat completion.
pub fn completion_text(body: &Value) -> Option<String> {
    body.pointer("/choices/0/message/content")
        .map(content_text)
        .filter(|text| !text.is_empty())
}

/// `POST /v1/chat/completions`: the memory proxy for chat.
pub(super) async fn chat_completions(
    State(state): State<Arc<ProxyState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticated(caller)?;
    caller.require(Scope::Read)?;
    caller.require(Scope::Write)?;
    let proxy = &state.proxy;
    let url = proxy.upstream("chat/completions")?;
    let mut request = json_object(&body, "chat completion")?;
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let latest = match request.get("messages") {
        Some(Value::Array(messages)) => latest_user_message(messages),
        _ => {
            return Err(ApiError(MemoryError::invalid(
                "messages",
                "messages is required: an array of {role, content}",
            )))
        }
    };
    let plan = plan(
        &proxy.settings,
        &caller,
        &headers,
        user_field(&request),
        latest,
    )?;
    let (injection, block) = recall_block(&state.runtime, &plan).await;
    if let (Some(block), Some(Value::Array(messages))) = (block, request.get_mut("messages")) {
        inject_memory(messages, &block);
    }
    let forward = proxy.post(&url, &headers, encode(&request)?, streaming);
    let mut response =
        exchange_upstream(&state, &plan, forward, streaming, stream::Dialect::Chat).await?;
    mnemos_headers(&mut response, &plan, &injection);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn memory_joins_the_first_system_message() {
        let mut messages = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "hi"}),
        ];
        inject_memory(&mut messages, "<memory>x</memory>");
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["content"], "Be brief.\n\n<memory>x</memory>");
    }

    #[test]
    fn without_a_system_message_one_is_added_in_front() {
        let mut messages = vec![json!({"role": "user", "content": "hi"})];
        inject_memory(&mut messages, "<memory>x</memory>");
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": "<memory>x</memory>"})
        );
        assert_eq!(messages[1]["role"], "user");
    }

    #[test]
    fn content_parts_get_a_text_part() {
        let mut messages =
            vec![json!({"role": "developer", "content": [{"type": "text", "text": "rules"}]})];
        inject_memory(&mut messages, "<memory>x</memory>");
        assert_eq!(messages[0]["content"][1]["text"], "<memory>x</memory>");
    }

    #[test]
    fn the_latest_user_message_is_the_query() {
        let messages = vec![
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": {"url": "x"}}]}),
            json!({"role": "tool", "content": "result"}),
        ];
        assert_eq!(latest_user_message(&messages).as_deref(), Some("second"));
        assert_eq!(
            latest_user_message(&[json!({"role": "system", "content": "x"})]),
            None
        );
    }

    #[test]
    fn completion_text_reads_the_first_choice() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "Paris."}}]});
        assert_eq!(completion_text(&body).as_deref(), Some("Paris."));
        assert_eq!(completion_text(&json!({"choices": []})), None);
    }
}
