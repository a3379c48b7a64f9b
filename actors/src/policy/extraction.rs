//! Mining one user/assistant exchange for memories worth keeping (pure, deterministic).
//!
//! The texts are split into sentences and matched against a few shapes:
//! - **preferences** of the user ("I like/love/prefer/hate …", "my favourite … is …") →
//!   semantic, tag `preference`;
//! - **facts** about the user ("I am a …", "I live in …", "I work at …", "my name is …",
//!   "my X is …") → semantic, tag `fact`;
//! - **decisions** by either side ("we decided …", "let's go with …", "we'll use …",
//!   "I chose …") → semantic (so a later decision supersedes an earlier one), tag `decision`;
//! - **procedures**: when the user asked how to do something, the numbered/bulleted steps
//!   (or, failing those, the imperative sentences) of the reply, kept together as one
//!   procedural memory, tag `procedure`.
//!
//! Everything else (questions, greetings, chit-chat, the assistant's filler) is skipped.
//! User statements are stored as "User: …", the assistant's decisions as "Assistant: …",
//! with leading discourse markers ("Actually, …") and a temporal "now" dropped, so that
//! "I now prefer tea" reads as a changed value of "I prefer coffee".

use crate::model::MemoryType;
use crate::policy::consistency::normalized_hash;

/// What kind of memory a candidate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtractionKind {
    /// Something the user likes or dislikes.
    Preference,
    /// A fact about the user.
    Fact,
    /// A decision taken in the conversation.
    Decision,
    /// How to do something, as steps.
    Procedure,
}

impl ExtractionKind {
    /// The tag every memory of this kind carries.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Preference => "preference",
            Self::Fact => "fact",
            Self::Decision => "decision",
            Self::Procedure => "procedure",
        }
    }

    /// The memory type a candidate of this kind is stored as.
    pub fn memory_type(self) -> MemoryType {
        match self {
            Self::Preference | Self::Fact | Self::Decision => MemoryType::Semantic,
            Self::Procedure => MemoryType::Procedural,
        }
    }
}

/// Who said the sentence a candidate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    /// The user's message.
    User,
    /// The assistant's reply.
    Assistant,
}

/// One memory worth keeping, with why it was kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Preference, fact, decision or procedure.
    pub kind: ExtractionKind,
    /// The type to store it as.
    pub memory_type: MemoryType,
    /// Standalone text of the memory.
    pub content: String,
    /// Tags to store it with (the kind's tag).
    pub tags: Vec<String>,
    /// Which rule matched, for logs and debugging.
    pub reason: String,
    /// Who said it.
    pub speaker: Speaker,
}

impl Candidate {
    fn new(kind: ExtractionKind, speaker: Speaker, content: String, reason: String) -> Self {
        Self {
            kind,
            memory_type: kind.memory_type(),
            content,
            tags: vec![kind.tag().to_string()],
            reason,
            speaker,
        }
    }
}

const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "etc", "mr", "mrs", "ms", "dr", "vs", "st"];

/// Split a text into trimmed sentences: at line breaks and at `.`, `!`, `?` followed by
/// whitespace (not after a bare number such as "1." or a common abbreviation).
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            current.push(c);
            let at_boundary = matches!(c, '.' | '!' | '?')
                && chars.get(i + 1).is_none_or(|next| next.is_whitespace());
            if !at_boundary {
                continue;
            }
            let last_word = current
                .trim_end_matches(['.', '!', '?'])
                .rsplit(char::is_whitespace)
                .next()
                .unwrap_or("")
                .to_lowercase();
            let numbered = !last_word.is_empty() && last_word.chars().all(|c| c.is_ascii_digit());
            if c == '.' && (numbered || ABBREVIATIONS.contains(&last_word.as_str())) {
                continue;
            }
            push_sentence(&mut out, &current);
            current.clear();
        }
        push_sentence(&mut out, &current);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, sentence: &str) {
    let trimmed = sentence.trim();
    if !trimmed.is_empty() {
        out.push(trimmed.to_string());
    }
}

/// Lower-case with typographic apostrophes made plain.
fn lower(text: &str) -> String {
    text.replace(['\u{2019}', '\u{2018}'], "'").to_lowercase()
}

const DISCOURSE_MARKERS: &[&str] = &[
    "actually",
    "oh",
    "well",
    "by the way",
    "btw",
    "also",
    "so",
    "and",
    "but",
    "ok",
    "okay",
    "anyway",
    "honestly",
    "fyi",
    "just so you know",
    "for the record",
    "yes",
    "yeah",
    "no",
];

/// `text` without `prefix` (ASCII, compared case-insensitively).
fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Drop leading discourse markers ("Actually, ", "Oh and ") and a temporal "now" /
/// "actually" right after "I", keeping the rest verbatim.
fn strip_markers(sentence: &str) -> String {
    let mut rest = sentence.trim().replace(['\u{2019}', '\u{2018}'], "'");
    'outer: loop {
        for marker in DISCOURSE_MARKERS {
            if let Some(after) = strip_prefix_ci(&rest, marker) {
                if after.starts_with([',', ' ']) {
                    rest = after.trim_start_matches([',', ' ']).to_string();
                    continue 'outer;
                }
            }
        }
        break;
    }
    for adverb in ["i now ", "i actually ", "i really ", "i also ", "i still "] {
        if let Some(after) = strip_prefix_ci(&rest, adverb) {
            rest = format!("I {after}");
        }
    }
    rest
}

const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "thanks",
    "thank you",
    "good morning",
    "good evening",
    "cheers",
    "bye",
    "great",
    "cool",
    "nice",
    "sure",
    "of course",
    "sounds good",
];

fn is_chit_chat(low: &str) -> bool {
    let words = low.split_whitespace().count();
    let greeting = GREETINGS.iter().any(|g| {
        low.strip_prefix(g)
            .is_some_and(|after| after.is_empty() || after.starts_with([' ', ',', '!', '.']))
    });
    low.ends_with('?') || words < 3 || (greeting && words <= 6)
}

const PREFERENCE_PREFIXES: &[&str] = &[
    "i like ",
    "i love ",
    "i prefer ",
    "i hate ",
    "i enjoy ",
    "i dislike ",
    "i don't like ",
    "i do not like ",
    "i can't stand ",
    "i adore ",
    "i'm a fan of ",
    "i am a fan of ",
    "i'm not a fan of ",
    "my favourite ",
    "my favorite ",
];

const DECISION_PREFIXES: &[&str] = &[
    "we decided",
    "we've decided",
    "we have decided",
    "i decided",
    "i've decided",
    "i have decided",
    "let's go with ",
    "let's use ",
    "we'll use ",
    "we will use ",
    "we'll go with ",
    "we will go with ",
    "we're going with ",
    "we are going with ",
    "i'm going with ",
    "i am going with ",
    "i'll go with ",
    "i will go with ",
    "i chose ",
    "we chose ",
    "we agreed ",
    "decision: ",
];

const FACT_PREFIXES: &[&str] = &[
    "i am a ",
    "i am an ",
    "i'm a ",
    "i'm an ",
    "i am from ",
    "i'm from ",
    "i live in ",
    "i live at ",
    "i work at ",
    "i work for ",
    "i work as ",
    "i work on ",
    "i'm based in ",
    "i am based in ",
    "i moved to ",
    "i was born ",
    "i speak ",
    "i have a ",
    "i have an ",
    "my name is ",
    "my name's ",
];

/// Words after "my" that introduce talk, not a fact ("my question is …").
const NOT_FACTS: &[&str] = &[
    "question", "problem", "issue", "guess", "point", "bad", "pleasure",
];

/// "my X is …" with X at most three words (not "my question is").
fn is_my_attribute(low: &str) -> bool {
    let Some(rest) = low.strip_prefix("my ") else {
        return false;
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    let Some(verb) = words
        .iter()
        .take(4)
        .position(|w| matches!(*w, "is" | "are" | "was"))
    else {
        return false;
    };
    verb >= 1 && words.len() > verb + 1 && !words[..verb].iter().any(|w| NOT_FACTS.contains(w))
}

/// A sentence as a standalone memory: "`Speaker`: Sentence." with a capital and a full stop.
fn standalone(speaker: Speaker, sentence: &str) -> String {
    let label = match speaker {
        Speaker::User => "User",
        Speaker::Assistant => "Assistant",
    };
    let mut text = sentence
        .trim()
        .trim_end_matches(['!', ',', ';', ':'])
        .to_string();
    if let Some(first) = text.chars().next() {
        let upper: String = first.to_uppercase().collect();
        text.replace_range(..first.len_utf8(), &upper);
    }
    if !text.ends_with('.') {
        text.push('.');
    }
    format!("{label}: {text}")
}

/// Classify one sentence of `speaker` (preference, fact or decision), or skip it.
fn classify(speaker: Speaker, sentence: &str) -> Option<Candidate> {
    let cleaned = strip_markers(sentence);
    let low = lower(&cleaned);
    if is_chit_chat(&low) {
        return None;
    }
    let matched =
        |prefixes: &[&'static str]| prefixes.iter().find(|p| low.starts_with(*p)).copied();
    let (kind, reason) = if let Some(p) = matched(DECISION_PREFIXES) {
        (
            ExtractionKind::Decision,
            format!("decision: \"{}\"", p.trim()),
        )
    } else if speaker == Speaker::Assistant {
        return None;
    } else if let Some(p) = matched(PREFERENCE_PREFIXES) {
        (
            ExtractionKind::Preference,
            format!("preference: \"{}\"", p.trim()),
        )
    } else if let Some(p) = matched(FACT_PREFIXES) {
        (ExtractionKind::Fact, format!("fact: \"{}\"", p.trim()))
    } else if is_my_attribute(&low) {
        (ExtractionKind::Fact, "fact: \"my … is\"".to_string())
    } else if let Some(words) = super::routing::factual_statement(&cleaned) {
        (
            ExtractionKind::Fact,
            format!("statement of fact: \"{words}\""),
        )
    } else {
        return None;
    };
    Some(Candidate::new(
        kind,
        speaker,
        standalone(speaker, &cleaned),
        reason,
    ))
}

const HOW_TO_MARKERS: &[&str] = &[
    "how do i ",
    "how can i ",
    "how should i ",
    "how would i ",
    "how do we ",
    "how can we ",
    "how do you ",
    "how to ",
    "what are the steps to ",
    "what are the steps for ",
    "steps to ",
    "walk me through ",
    "show me how to ",
    "explain how to ",
];

/// What the user asked how to do ("deploy the app"), if the message asks for a procedure.
fn how_to_topic(user: &str) -> Option<String> {
    let low = lower(user);
    let (position, marker) = HOW_TO_MARKERS
        .iter()
        .filter_map(|m| low.find(m).map(|at| (at, *m)))
        .min_by_key(|(at, _)| *at)?;
    let topic: String = low[position + marker.len()..]
        .chars()
        .take_while(|c| !matches!(c, '?' | '.' | '!' | '\n'))
        .collect();
    let topic = topic.trim();
    Some(topic.to_string())
}

/// A list item ("1. …", "2) …", "- …", "* …", "Step 3: …") without its marker.
fn step_text(line: &str) -> Option<String> {
    let line = line.trim();
    let rest = if let Some(after) = strip_prefix_ci(line, "step ") {
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        after[digits..].trim_start_matches([':', '.', ')', ' '])
    } else if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("\u{2022} "))
    {
        rest
    } else {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || digits > 3 {
            return None;
        }
        let after = &line[digits..];
        after
            .strip_prefix(". ")
            .or_else(|| after.strip_prefix(") "))?
    };
    let rest = rest.trim();
    (!rest.is_empty()).then(|| rest.to_string())
}

const IMPERATIVE_VERBS: &[&str] = &[
    "run",
    "install",
    "open",
    "click",
    "type",
    "create",
    "add",
    "set",
    "go",
    "select",
    "copy",
    "edit",
    "restart",
    "enable",
    "disable",
    "download",
    "build",
    "deploy",
    "configure",
    "start",
    "stop",
    "press",
    "navigate",
    "check",
    "save",
    "push",
    "commit",
    "clone",
    "update",
    "remove",
    "delete",
    "make",
    "use",
    "write",
    "export",
    "import",
    "log",
    "sign",
    "choose",
    "enter",
    "change",
    "move",
    "mount",
    "upload",
    "then",
    "next",
    "finally",
    "first",
];

/// The steps of the assistant's reply: its list items, or else its imperative sentences.
fn procedure_steps(assistant: &str) -> Vec<String> {
    let listed: Vec<String> = assistant.lines().filter_map(step_text).collect();
    if listed.len() >= 2 {
        return listed;
    }
    sentences(assistant)
        .into_iter()
        .filter(|s| {
            let low = lower(s);
            let first = low
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("");
            IMPERATIVE_VERBS.contains(&first) && !low.ends_with('?')
        })
        .collect()
}

/// The procedure the reply teaches, when the user asked how to do something and the
/// reply holds at least two steps: "How to <topic>: 1. …; 2. …" as one memory.
fn procedure(user: &str, assistant: &str) -> Option<Candidate> {
    let topic = how_to_topic(user)?;
    let steps = procedure_steps(assistant);
    if steps.len() < 2 {
        return None;
    }
    let heading = if topic.is_empty() {
        "Procedure".to_string()
    } else {
        format!("How to {topic}")
    };
    let body: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let step = step.trim_end_matches(['.', ';']);
            format!("{}. {step}.", i + 1)
        })
        .collect();
    Some(Candidate::new(
        ExtractionKind::Procedure,
        Speaker::Assistant,
        format!("{heading}: {}", body.join(" ")),
        format!(
            "procedure: {} steps answering a how-to question",
            steps.len()
        ),
    ))
}

/// The memories worth keeping from one exchange, in the order they were said (the
/// procedure, if any, after the user's statements and before the assistant's
/// decisions), without repeats, at most `budget` of them.
pub fn extract(user: &str, assistant: &str, budget: usize) -> Vec<Candidate> {
    let mut found: Vec<Candidate> = sentences(user)
        .iter()
        .filter_map(|s| classify(Speaker::User, s))
        .collect();
    let procedure = procedure(user, assistant);
    let steps: Vec<String> = if procedure.is_some() {
        procedure_steps(assistant)
    } else {
        Vec::new()
    };
    found.extend(procedure);
    found.extend(
        sentences(assistant)
            .iter()
            // A step already kept in the procedure is not kept again as a decision.
            .filter(|s| !steps.iter().any(|step| s.contains(step.as_str())))
            .filter_map(|s| classify(Speaker::Assistant, s)),
    );
    let mut seen = std::collections::HashSet::new();
    found.retain(|c| seen.insert(normalized_hash(&c.content)));
    found.truncate(budget);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(candidates: &[Candidate]) -> Vec<ExtractionKind> {
        candidates.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn sentences_split_at_terminators_but_not_list_numbers() {
        assert_eq!(
            sentences("Hi there! I live in Paris. Do you? e.g. this stays\n1. Run it"),
            vec![
                "Hi there!",
                "I live in Paris.",
                "Do you?",
                "e.g. this stays",
                "1. Run it"
            ]
        );
    }

    #[test]
    fn preferences_are_semantic_and_tagged() {
        let found = extract("I prefer coffee. My favourite editor is vim!", "", 8);
        assert_eq!(
            kinds(&found),
            vec![ExtractionKind::Preference, ExtractionKind::Preference]
        );
        assert_eq!(found[0].content, "User: I prefer coffee.");
        assert_eq!(found[0].memory_type, MemoryType::Semantic);
        assert_eq!(found[0].tags, vec!["preference"]);
        assert_eq!(found[1].content, "User: My favourite editor is vim.");
        let hate = extract("Honestly, I don't like meetings before ten.", "", 8);
        assert_eq!(hate[0].content, "User: I don't like meetings before ten.");
    }

    #[test]
    fn markers_and_now_are_dropped_so_changes_read_as_changed_values() {
        let found = extract("Actually, I now prefer tea.", "", 8);
        assert_eq!(found[0].content, "User: I prefer tea.");
        assert!(crate::policy::consistency::contradiction(
            "User: I prefer coffee.",
            &found[0].content
        )
        .is_some());
    }

    #[test]
    fn facts_about_the_user() {
        let found = extract(
            "I'm a data engineer. I live in Lyon. My name is Ana. My dog is called Rex. I work at Acme.",
            "",
            8,
        );
        assert_eq!(kinds(&found), vec![ExtractionKind::Fact; 5]);
        assert!(found.iter().all(|c| c.tags == vec!["fact"]));
        assert_eq!(found[1].content, "User: I live in Lyon.");
        assert!(extract("My question is simple really.", "", 8).is_empty());
    }

    #[test]
    fn decisions_from_either_side() {
        let found = extract(
            "OK, let's go with Postgres for the database.",
            "Sounds good. We'll use Postgres 16 with the default settings.",
            8,
        );
        assert_eq!(
            kinds(&found),
            vec![ExtractionKind::Decision, ExtractionKind::Decision]
        );
        assert_eq!(found[0].speaker, Speaker::User);
        assert_eq!(
            found[1].content,
            "Assistant: We'll use Postgres 16 with the default settings."
        );
        assert!(found.iter().all(|c| c.memory_type == MemoryType::Semantic));
    }

    #[test]
    fn numbered_steps_become_one_procedure() {
        let found = extract(
            "How do I deploy the app?",
            "Sure! Here is how:\n1. Run cargo build --release.\n2. Copy the binary to the server.\n3) Restart the service.\nLet me know if it works!",
            8,
        );
        assert_eq!(kinds(&found), vec![ExtractionKind::Procedure]);
        assert_eq!(found[0].memory_type, MemoryType::Procedural);
        assert_eq!(found[0].tags, vec!["procedure"]);
        assert_eq!(
            found[0].content,
            "How to deploy the app: 1. Run cargo build --release. 2. Copy the binary to the server. 3. Restart the service."
        );
    }

    #[test]
    fn imperative_sentences_become_a_procedure_when_asked_how() {
        let found = extract(
            "how can i reset my password",
            "Open the settings page. Click on Security. Then choose Reset password. Hope that helps.",
            8,
        );
        assert_eq!(kinds(&found), vec![ExtractionKind::Procedure]);
        assert!(found[0]
            .content
            .starts_with("How to reset my password: 1. Open"));
        // Without a how-to question, steps are not a procedure.
        assert!(extract("thanks", "1. Open it.\n2. Close it.", 8).is_empty());
    }

    #[test]
    fn chit_chat_questions_and_filler_are_skipped() {
        assert!(extract(
            "Hi! How are you? Do you like pizza? Thanks a lot.",
            "I'm doing well, thank you for asking. I love helping. Great question!",
            8
        )
        .is_empty());
        assert!(extract("", "", 8).is_empty());
    }

    #[test]
    fn repeats_are_kept_once_and_the_budget_caps_the_count() {
        let found = extract(
            "I like tea. I like tea! I like jazz. I live in Oslo.",
            "",
            8,
        );
        assert_eq!(found.len(), 3);
        let capped = extract("I like tea. I like jazz. I live in Oslo.", "", 2);
        assert_eq!(capped.len(), 2);
        assert_eq!(capped[1].content, "User: I like jazz.");
        assert!(extract("I like tea.", "", 0).is_empty());
    }
}
