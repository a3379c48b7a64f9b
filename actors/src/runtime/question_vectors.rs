//! Vectors of recently asked questions: a question asked again (a client's retry,
//! recall then build_context on one turn, the proxy on every request of a thread) is
//! not embedded again. Embedding a question is most of a recall's time with a
//! sentence model on a CPU; looking it up here is a hash of the text.

use std::collections::HashMap;
use std::sync::Arc;

/// Longest question text kept (bytes); longer texts are embedded every time, so the
/// cache holds at most `capacity` × this much text.
pub(super) const MAX_QUESTION_BYTES: usize = 1024;

/// A least-recently-used map from question text to its embedding.
#[derive(Debug)]
pub(super) struct QuestionVectors {
    /// Most questions kept (0 keeps none).
    capacity: usize,
    /// Use counter: each get or put takes the next number.
    clock: u64,
    /// Text → (last use, vector).
    entries: HashMap<String, (u64, Arc<Vec<f32>>)>,
}

impl QuestionVectors {
    /// An empty cache of at most `capacity` questions.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            clock: 0,
            entries: HashMap::new(),
        }
    }

    /// The vector of `text`, if it was embedded recently (and mark it used).
    pub(super) fn get(&mut self, text: &str) -> Option<Arc<Vec<f32>>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(text).map(|(used, vector)| {
            *used = clock;
            vector.clone()
        })
    }

    /// Forget every vector (the embedding model changed).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }

    /// Keep `vector` for `text`, dropping the least recently used question when full.
    pub(super) fn put(&mut self, text: &str, vector: Arc<Vec<f32>>) {
        if self.capacity == 0 || text.len() > MAX_QUESTION_BYTES {
            return;
        }
        self.clock += 1;
        if !self.entries.contains_key(text) && self.entries.len() >= self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(text.to_string(), (self.clock, vector));
    }

    /// Questions held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recently_used_questions() {
        let mut cache = QuestionVectors::new(2);
        cache.put("a", Arc::new(vec![1.0]));
        cache.put("b", Arc::new(vec![2.0]));
        assert_eq!(
            cache.get("a").as_deref(),
            Some(&vec![1.0]),
            "a is used again"
        );
        cache.put("c", Arc::new(vec![3.0]));
        assert!(cache.get("b").is_none(), "b was the least recently used");
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
        assert_eq!(cache.len(), 2);
        // Putting a held question again replaces it without evicting another.
        cache.put("a", Arc::new(vec![4.0]));
        assert_eq!(cache.get("a").as_deref(), Some(&vec![4.0]));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn keeps_nothing_when_off_or_for_long_texts() {
        let mut off = QuestionVectors::new(0);
        off.put("a", Arc::new(vec![1.0]));
        assert!(off.get("a").is_none());
        let mut cache = QuestionVectors::new(4);
        let long = "x".repeat(MAX_QUESTION_BYTES + 1);
        cache.put(&long, Arc::new(vec![1.0]));
        assert!(cache.get(&long).is_none());
        assert_eq!(cache.len(), 0);
    }
}
