//! What a re-embedding still has to do: which memories of a page of its work list need
//! a vector of the new model (none yet, or one made from a text that changed since),
//! and when the background passes are close enough to done to take the exclusive gate.

use crate::model::MemoryId;
use crate::store::ReembedRow;

/// Background passes stop (and the switch takes the gate) once a pass embedded at
/// most this many memories: what is left is embedded during the short pause.
pub const QUIET_PASS: usize = 64;

/// Background passes made at most before switching anyway (a steady write stream
/// could otherwise keep every pass busy).
pub const MAX_PASSES: usize = 8;

/// The text a memory's vector is made of: its title (if any) on a line before the content.
pub fn embedded_text(title: Option<&str>, content: &str) -> String {
    match title {
        Some(title) if !title.is_empty() => format!("{title}\n{content}"),
        _ => content.to_string(),
    }
}

/// A stable hash of `text` (64-bit FNV-1a, hex): the source hash of a next-model vector.
pub fn text_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// A memory to embed with the new model: its id, the text, and the text's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The memory.
    pub id: MemoryId,
    /// What to embed.
    pub text: String,
    /// [`text_hash`] of it, stored beside the vector.
    pub source_hash: String,
}

/// The rows of a page that need a (fresh) vector of the new model.
pub fn pending(page: &[ReembedRow]) -> Vec<Pending> {
    page.iter()
        .filter_map(|row| {
            let text = embedded_text(row.title.as_deref(), &row.content);
            let source_hash = text_hash(&text);
            (row.next_hash.as_deref() != Some(source_hash.as_str())).then(|| Pending {
                id: row.id.clone(),
                text,
                source_hash,
            })
        })
        .collect()
}

/// Whether background passes should stop: the last one embedded little, or enough ran.
pub fn ready_to_switch(last_pass_embedded: usize, passes: usize) -> bool {
    last_pass_embedded <= QUIET_PASS || passes >= MAX_PASSES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, title: Option<&str>, content: &str, next: Option<&str>) -> ReembedRow {
        ReembedRow {
            id: MemoryId(id.into()),
            title: title.map(str::to_string),
            content: content.into(),
            next_hash: next.map(str::to_string),
        }
    }

    #[test]
    fn only_missing_and_changed_texts_are_pending() {
        let done = text_hash("T\nkept");
        let page = vec![
            row("a", None, "never embedded", None),
            row("b", Some("T"), "kept", Some(&done)),
            row("c", Some("T"), "changed since", Some(&done)),
        ];
        let ids: Vec<_> = pending(&page).into_iter().map(|p| p.id.0).collect();
        assert_eq!(ids, vec!["a", "c"]);
    }

    #[test]
    fn the_text_is_the_one_the_write_path_embeds() {
        assert_eq!(embedded_text(Some("Title"), "body"), "Title\nbody");
        assert_eq!(embedded_text(Some(""), "body"), "body");
        assert_eq!(embedded_text(None, "body"), "body");
        assert_ne!(text_hash("a"), text_hash("b"));
        assert_eq!(text_hash("a"), text_hash("a"));
    }

    #[test]
    fn passes_stop_when_quiet_or_after_the_most() {
        assert!(!ready_to_switch(QUIET_PASS + 1, 1));
        assert!(ready_to_switch(QUIET_PASS, 1));
        assert!(ready_to_switch(10_000, MAX_PASSES));
    }
}
