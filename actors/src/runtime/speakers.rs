//! The speakers each agent's memories are attributed to, learnt from what is
//! remembered and recalled, so that recall knows before it embeds a question which of
//! its words name a speaker (see `recall.topic_without_speakers`). Lost on restart and
//! learnt again: the first question naming a speaker after a restart is re-embedded
//! once the candidates show the name.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::model::{AgentId, Memory};
use crate::policy::fusion::{names_speaker, speaker_label};

/// Most speakers remembered per agent.
const MAX_SPEAKERS: usize = 4096;

/// Who a memory is attributed to: `metadata.speaker` when it is a string, else the label
/// of a transcript line ("Alice: …").
pub(super) fn speaker_of(memory: &Memory) -> Option<&str> {
    memory
        .metadata
        .get("speaker")
        .and_then(serde_json::Value::as_str)
        .or_else(|| speaker_label(&memory.content))
}

/// Known speakers per agent (lower case).
#[derive(Default)]
pub(super) struct Speakers {
    /// The speakers of each agent.
    known: Mutex<HashMap<AgentId, HashSet<String>>>,
}

impl Speakers {
    /// Remember who `agent`'s `memories` are attributed to.
    pub(super) fn learn<'a>(&self, agent: &AgentId, memories: impl Iterator<Item = &'a Memory>) {
        let mut found: Vec<String> = memories
            .filter(|m| m.agent_id == *agent)
            .filter_map(speaker_of)
            .map(str::to_lowercase)
            .collect();
        if found.is_empty() {
            return;
        }
        found.sort_unstable();
        found.dedup();
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let speakers = known.entry(agent.clone()).or_default();
        for speaker in found {
            if speakers.len() >= MAX_SPEAKERS {
                break;
            }
            speakers.insert(speaker);
        }
    }

    /// The known speakers of `agent` that `words` name, sorted.
    pub(super) fn named(&self, agent: &AgentId, words: &HashSet<String>) -> Vec<String> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let mut named: Vec<String> = known
            .get(agent)
            .map(|speakers| {
                speakers
                    .iter()
                    .filter(|s| names_speaker(words, s))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        named.sort_unstable();
        named
    }
}
