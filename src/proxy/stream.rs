//! Streamed answers: events forwarded to the client as they arrive, the assistant's
//! text gathered on the way, and the exchange remembered only when the stream said it
//! was complete and the client stayed to the end.

use axum::body::{Body, Bytes};
use futures_util::StreamExt;
use serde_json::Value;

use super::Exchange;

/// Which API's events a stream carries (and which body shape a plain answer has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Chat completions: `choices[0].delta.content` chunks, ended by `data: [DONE]`.
    Chat,
    /// The Responses API: `response.output_text.delta` events, ended by
    /// `response.completed`.
    Responses,
}

impl Dialect {
    /// The assistant's text in a plain (non-streamed) answer of this API.
    pub fn answer(self, body: &Value) -> Option<String> {
        match self {
            Dialect::Chat => super::chat::completion_text(body),
            Dialect::Responses => super::responses::response_text(body),
        }
    }
}

/// Accumulates the assistant's text from the SSE events of a streamed answer.
#[derive(Debug)]
pub struct StreamTranscript {
    /// Which events to read.
    dialect: Dialect,
    /// Bytes of an unfinished line carried to the next chunk.
    pending: Vec<u8>,
    /// The assistant's text so far.
    text: String,
    /// True once the stream said it was complete.
    done: bool,
}

impl StreamTranscript {
    /// An empty transcript of a `dialect` stream.
    pub fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            pending: Vec::new(),
            text: String::new(),
            done: false,
        }
    }

    /// Feed one chunk of the upstream body.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim().strip_prefix("data:") else {
                continue;
            };
            self.event(data.trim());
        }
    }

    /// One `data:` payload.
    fn event(&mut self, data: &str) {
        if self.dialect == Dialect::Chat && data == "[DONE]" {
            self.done = true;
            return;
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return;
        };
        match self.dialect {
            Dialect::Chat => {
                if let Some(delta) = event
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                {
                    self.text.push_str(delta);
                }
            }
            Dialect::Responses => match event.get("type").and_then(Value::as_str) {
                Some("response.output_text.delta") => {
                    if let Some(delta) = event.get("delta").and_then(Value::as_str) {
                        self.text.push_str(delta);
                    }
                }
                Some("response.completed") => self.done = true,
                _ => {}
            },
        }
    }

    /// The text so far, and whether the stream said it was complete.
    pub fn finish(self) -> (String, bool) {
        (self.text, self.done)
    }
}

/// Forward a streamed answer chunk by chunk as it arrives; remember the exchange after
/// the last chunk, unless the client left or the stream did not say it was complete.
pub(super) fn through(upstream: reqwest::Response, dialect: Dialect, exchange: Exchange) -> Body {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(32);
    tokio::spawn(async move {
        let mut transcript = StreamTranscript::new(dialect);
        let mut chunks = upstream.bytes_stream();
        let mut client_gone = false;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(bytes) => {
                    transcript.feed(&bytes);
                    if sender.send(Ok(bytes)).await.is_err() {
                        client_gone = true;
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the upstream stream broke off");
                    let _ = sender
                        .send(Err(std::io::Error::other(error.to_string())))
                        .await;
                    break;
                }
            }
        }
        drop(sender);
        let (text, complete) = transcript.finish();
        if client_gone || !complete {
            tracing::debug!(
                client_gone,
                complete,
                "incomplete stream: the exchange is not remembered"
            );
            return;
        }
        if !text.trim().is_empty() {
            exchange.remember(text);
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_deltas_join_across_chunk_boundaries() {
        let mut transcript = StreamTranscript::new(Dialect::Chat);
        let body = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n\
                    data: [DONE]\n\n";
        for chunk in body.as_bytes().chunks(7) {
            transcript.feed(chunk);
        }
        assert_eq!(transcript.finish(), ("Hello".to_string(), true));
        let mut cut = StreamTranscript::new(Dialect::Chat);
        cut.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n");
        assert_eq!(cut.finish(), ("Hi".to_string(), false));
    }

    #[test]
    fn responses_deltas_join_and_completion_ends_them() {
        let body = "event: response.created\ndata: {\"type\":\"response.created\"}\n\n\
                    event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Port \"}\n\n\
                    event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"8443.\"}\n\n\
                    event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"Port 8443.\"}\n\n";
        let mut transcript = StreamTranscript::new(Dialect::Responses);
        for chunk in body.as_bytes().chunks(5) {
            transcript.feed(chunk);
        }
        let mut finished = StreamTranscript::new(Dialect::Responses);
        finished.feed(body.as_bytes());
        finished.feed(b"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n");
        assert_eq!(transcript.finish(), ("Port 8443.".to_string(), false));
        assert_eq!(finished.finish(), ("Port 8443.".to_string(), true));
        // [DONE] means nothing to the Responses API.
        let mut done = StreamTranscript::new(Dialect::Responses);
        done.feed(b"data: [DONE]\n");
        assert!(!done.finish().1);
    }
}
