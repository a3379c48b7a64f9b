//! Type routing: which memory system a text belongs to, by pattern rules, with a
//! reason a person can read (pure). An explicit type from the caller always wins;
//! when the rules are ambiguous an arbiter (an LLM, when one is configured) may decide.

use crate::model::MemoryType;
use crate::text::is_stopword;

/// The rules' verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingDecision {
    /// Chosen type.
    pub memory_type: MemoryType,
    /// Why, in words.
    pub reason: String,
    /// True when two types scored the same (an arbiter may overrule).
    pub ambiguous: bool,
    /// −1..1 for affective memories.
    pub valence: Option<f32>,
    /// 0..1 for affective memories.
    pub arousal: Option<f32>,
}

/// Emotion words with (valence, arousal).
const EMOTIONS: &[(&str, f32, f32)] = &[
    ("afraid", -0.7, 0.8),
    ("angry", -0.8, 0.9),
    ("annoyed", -0.5, 0.6),
    ("anxious", -0.6, 0.8),
    ("ashamed", -0.6, 0.5),
    ("bored", -0.3, 0.1),
    ("calm", 0.4, 0.1),
    ("delighted", 0.9, 0.7),
    ("depressed", -0.8, 0.3),
    ("disappointed", -0.6, 0.4),
    ("excited", 0.8, 0.9),
    ("frustrated", -0.6, 0.7),
    ("furious", -0.9, 1.0),
    ("glad", 0.6, 0.4),
    ("grateful", 0.8, 0.4),
    ("happy", 0.8, 0.6),
    ("hate", -0.9, 0.8),
    ("hurt", -0.7, 0.6),
    ("lonely", -0.6, 0.3),
    ("love", 0.9, 0.6),
    ("nervous", -0.4, 0.8),
    ("proud", 0.8, 0.6),
    ("relieved", 0.6, 0.3),
    ("sad", -0.7, 0.3),
    ("scared", -0.7, 0.9),
    ("stressed", -0.6, 0.8),
    ("thrilled", 0.9, 0.9),
    ("upset", -0.6, 0.6),
    ("worried", -0.5, 0.7),
];

const WORKING_MARKERS: &[&str] = &[
    "current task",
    "remind me",
    "wip",
    "todo",
    "to do:",
    "right now i",
    "in progress",
    "for now",
    "next step",
    "working on",
];

const PROCEDURE_VERBS: &[&str] = &[
    "add",
    "build",
    "click",
    "configure",
    "copy",
    "create",
    "deploy",
    "download",
    "enable",
    "install",
    "open",
    "restart",
    "run",
    "set",
    "setup",
    "start",
    "stop",
    "update",
    "upgrade",
    "use",
];

const TIME_WORDS: &[&str] = &[
    "yesterday",
    "today",
    "tonight",
    "ago",
    "earlier",
    "morning",
    "afternoon",
    "evening",
    "weekend",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "last",
    "recently",
];

const DEFINITION_MARKERS: &[&str] = &[
    " is a ",
    " is an ",
    " is the ",
    " are ",
    " means ",
    " refers to ",
    " is defined as ",
    " stands for ",
    "my name is",
    " prefers ",
    " lives in ",
    " works at ",
    " is my ",
    " always ",
    " never ",
    " live in ",
    " work at ",
    " work as ",
    " work for ",
    " works for ",
    " my favourite ",
    " my favorite ",
    " is set to ",
];

/// True when `phrase` occurs in `lower` as whole words: "wip" in "a wip branch" but not
/// in "I wiped the disk", " steps" in "three steps" but not in "my stepson".
fn has_phrase(lower: &str, phrase: &str) -> bool {
    let needle = phrase.trim();
    if needle.is_empty() {
        return false;
    }
    let wordlike = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    lower.match_indices(needle).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + needle.len()..].chars().next();
        let starts_word = !needle.starts_with(char::is_alphanumeric) || !wordlike(before);
        let ends_word = !needle.ends_with(char::is_alphanumeric) || !wordlike(after);
        starts_word && ends_word
    })
}

/// A token that negates: "not", "never", "no", or a contraction ending in "n't".
fn is_negation(token: &str) -> bool {
    matches!(token, "not" | "never" | "no") || token.ends_with("n't")
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '\u{2019}')
        .map(|w| w.trim_matches(|c| c == '\'' || c == '\u{2019}'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('\u{2019}', "'"))
        .collect()
}

/// True when `text` reads like a how-to: how-to phrasing, numbered steps, an
/// imperative procedure verb, "first … then …", or a past-tense account of running
/// commands ("I fixed it by running …"). The sleep cycle abstracts clusters of such
/// texts into procedural memories.
pub fn looks_procedural(text: &str) -> bool {
    let lower = format!(" {} ", text.to_lowercase());
    let tokens = words(text);
    let first = tokens.first().map(String::as_str).unwrap_or("");
    let numbered = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.chars().next().is_some_and(|c| c.is_ascii_digit())
                && (l.contains(". ") || l.contains(") "))
        })
        .count();
    lower.contains(" how to ")
        || has_phrase(&lower, "steps")
        || numbered >= 2
        || PROCEDURE_VERBS.contains(&first)
        || (lower.contains(" first ") && lower.contains(" then "))
        || lower.contains(" by running ")
        || lower.contains(" ran `")
        || lower.contains(" run `")
}

/// The feeling `text` expresses, by its emotion words: (valence −1..1, arousal 0..1).
/// A negation turns the valence around and halves it ("not happy"). None without an
/// emotion word. Used for affective memories whichever way they were typed.
pub fn emotion_of(text: &str) -> Option<(f32, f32)> {
    emotion_in(&words(text)).map(|(v, a, _)| (v, a))
}

fn emotion_in(tokens: &[String]) -> Option<(f32, f32, &'static str)> {
    let emotions: Vec<&(&str, f32, f32)> = EMOTIONS
        .iter()
        .filter(|(w, _, _)| tokens.iter().any(|t| t == w))
        .collect();
    let first = emotions.first()?;
    let n = emotions.len() as f32;
    let mut valence = emotions.iter().map(|e| e.1).sum::<f32>() / n;
    if tokens.iter().any(|t| is_negation(t)) {
        valence = -valence * 0.5;
    }
    let arousal = emotions.iter().map(|e| e.2).sum::<f32>() / n;
    Some((valence.clamp(-1.0, 1.0), arousal.clamp(0.0, 1.0), first.0))
}

/// Verbs (base form) that state how things are or habitually go: "the DB runs on port
/// 5433", "we deploy on Tuesdays", "Alice owns the billing service".
const FACT_VERBS: &[&str] = &[
    "allow", "attend", "belong", "bill", "block", "build", "call", "charge", "close", "commit",
    "connect", "contain", "cost", "cover", "deploy", "depend", "drink", "drive", "eat", "expire",
    "go", "handle", "hate", "have", "hold", "host", "include", "keep", "last", "lead", "like",
    "listen", "live", "love", "manage", "mean", "meet", "merge", "need", "open", "own", "pay",
    "play", "point", "prefer", "publish", "push", "read", "release", "report", "require", "review",
    "rotate", "run", "send", "serve", "ship", "sleep", "speak", "start", "store", "study",
    "support", "sync", "take", "teach", "test", "train", "use", "visit", "want", "watch", "wear",
    "work", "write",
];

/// Subjects that take a verb's base form ("we deploy", "they use").
const PLURAL_SUBJECTS: &[&str] = &["i", "we", "you", "they"];

/// Words before a base form that make it no statement of how things are ("to run",
/// "will deploy", "did use").
const NOT_STATING: &[&str] = &[
    "to", "will", "would", "should", "could", "can", "must", "might", "may", "shall", "did",
    "didn't", "won't", "can't", "let's", "please",
];

/// Words that make a statement habitual ("every Friday", "usually", "on Tuesdays").
const HABITUAL_WORDS: &[&str] = &[
    "always",
    "usually",
    "often",
    "every",
    "each",
    "daily",
    "weekly",
    "monthly",
    "nightly",
    "hourly",
    "yearly",
    "weekdays",
    "weekends",
    "mondays",
    "tuesdays",
    "wednesdays",
    "thursdays",
    "fridays",
    "saturdays",
    "sundays",
    "mornings",
    "evenings",
    "nights",
];

/// The third-person present forms of a base verb ("run" → "runs", "watch" → "watches",
/// "study" → "studies", "have" → "has", "go" → "goes").
fn third_person_forms(base: &str) -> Vec<String> {
    match base {
        "have" => return vec!["has".into()],
        "go" => return vec!["goes".into()],
        _ => {}
    }
    let mut forms = vec![format!("{base}s")];
    if base.ends_with(['s', 'x', 'z']) || base.ends_with("ch") || base.ends_with("sh") {
        forms.push(format!("{base}es"));
    }
    if let Some(stem) = base.strip_suffix('y') {
        if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) {
            forms.push(format!("{stem}ies"));
        }
    }
    forms
}

/// The base verb of `word` when it is a present form of a [`FACT_VERBS`] verb, and
/// whether it is the third-person form. Every form is worked out once: routing runs on
/// every write, so this is a map lookup per word.
fn fact_verb(word: &str) -> Option<(&'static str, bool)> {
    static FORMS: std::sync::LazyLock<std::collections::HashMap<String, (&'static str, bool)>> =
        std::sync::LazyLock::new(|| {
            let mut forms = std::collections::HashMap::new();
            for base in FACT_VERBS {
                for form in third_person_forms(base) {
                    forms.entry(form).or_insert((*base, true));
                }
            }
            // A base form wins over a third-person form spelt the same.
            for base in FACT_VERBS {
                forms.insert((*base).to_string(), (*base, false));
            }
            forms
        });
    FORMS.get(word).copied()
}

/// Adverbs that may stand between a subject and its verb ("they usually meet").
const BETWEEN_SUBJECT_AND_VERB: &[&str] = &[
    "always",
    "usually",
    "often",
    "sometimes",
    "rarely",
    "never",
    "also",
    "still",
    "only",
    "mostly",
    "now",
    "normally",
    "generally",
];

/// Something concrete the statement is about: a number, a name (a capitalised word
/// that is not a common word, "I" aside), or a habit ("every", "on Tuesdays").
fn concrete_anchor(text: &str, tokens: &[String]) -> bool {
    let names = text
        .split(char::is_whitespace)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| *w != "I" && w.chars().next().is_some_and(char::is_uppercase))
        .any(|w| !is_stopword(&w.to_lowercase()));
    names
        || tokens.iter().any(|t| t.chars().any(|c| c.is_ascii_digit()))
        || tokens.iter().any(|t| HABITUAL_WORDS.contains(&t.as_str()))
}

/// When `text` is a plain present-tense statement of fact about something concrete
/// ("The staging DB runs on port 5433", "We deploy on Tuesdays", "Alice owns billing"),
/// the words that show it (`"db runs"`); `None` for questions, instructions, talk about
/// the past or the future, and vague statements ("that works").
pub fn factual_statement(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.ends_with('?') || trimmed.lines().count() > 3 {
        return None;
    }
    let tokens = words(trimmed);
    let first = tokens.first()?;
    if PROCEDURE_VERBS.contains(&first.as_str()) {
        return None;
    }
    let found = (1..tokens.len()).find_map(|at| {
        let verb = tokens[at].as_str();
        let (_, third_person) = fact_verb(verb)?;
        // The subject: the word before, past an adverb ("they usually meet").
        let subject = tokens[..at]
            .iter()
            .rev()
            .find(|w| !BETWEEN_SUBJECT_AND_VERB.contains(&w.as_str()))?
            .as_str();
        let states = if third_person {
            !PLURAL_SUBJECTS.contains(&subject)
                && !matches!(subject, "it" | "that" | "this" | "which" | "what" | "who")
                && !NOT_STATING.contains(&subject)
                && (matches!(subject, "he" | "she") || !is_stopword(subject))
        } else {
            PLURAL_SUBJECTS.contains(&subject)
        };
        states.then(|| format!("{subject} {verb}"))
    })?;
    concrete_anchor(trimmed, &tokens).then_some(found)
}

/// Classify `text` by rules.
pub fn route(text: &str) -> RoutingDecision {
    let lower = format!(" {} ", text.to_lowercase());
    let tokens = words(text);
    let mut scores: Vec<(MemoryType, f32, String)> = Vec::new();

    if let Some(marker) = WORKING_MARKERS.iter().find(|m| has_phrase(&lower, m)) {
        scores.push((
            MemoryType::Working,
            3.0,
            format!("transient marker \"{marker}\""),
        ));
    }

    let numbered_steps = text.lines().filter(|l| {
        let l = l.trim_start();
        l.chars().next().is_some_and(|c| c.is_ascii_digit())
            && (l.contains(". ") || l.contains(") "))
    });
    let step_count = numbered_steps.count();
    let first = tokens.first().map(String::as_str).unwrap_or("");
    if lower.contains(" how to ")
        || lower.contains("how do i ")
        || has_phrase(&lower, "steps")
        || step_count >= 2
    {
        let why = if step_count >= 2 {
            "numbered steps".to_string()
        } else {
            "how-to phrasing".to_string()
        };
        scores.push((MemoryType::Procedural, 3.0, why));
    } else if PROCEDURE_VERBS.contains(&first)
        || lower.contains(" first ") && lower.contains(" then ")
    {
        scores.push((
            MemoryType::Procedural,
            2.0,
            format!("instruction starting with \"{first}\""),
        ));
    }

    let emotion = emotion_in(&tokens);
    let mut valence = None;
    let mut arousal = None;
    if let Some((v, a, word)) = emotion {
        valence = Some(v);
        arousal = Some(a);
        scores.push((
            MemoryType::Affective,
            2.5,
            format!("emotion word \"{word}\""),
        ));
    }

    let time_word = tokens.iter().find(|t| TIME_WORDS.contains(&t.as_str()));
    let past_action = tokens.windows(2).find(|w| {
        matches!(w[0].as_str(), "i" | "we")
            && (w[1].ends_with("ed")
                || matches!(
                    w[1].as_str(),
                    "went"
                        | "met"
                        | "saw"
                        | "got"
                        | "had"
                        | "made"
                        | "took"
                        | "bought"
                        | "ran"
                        | "ate"
                        | "found"
                        | "gave"
                        | "told"
                        | "said"
                        | "was"
                        | "were"
                        | "did"
                        | "shipped"
                        | "fixed"
                ))
    });
    if let Some(word) = time_word {
        scores.push((
            MemoryType::Episodic,
            2.0,
            format!("temporal word \"{word}\""),
        ));
    } else if let Some(action) = past_action {
        scores.push((
            MemoryType::Episodic,
            1.5,
            format!("first-person past action \"{} {}\"", action[0], action[1]),
        ));
    }

    // A negated statement is still a statement of fact ("Bob is not my manager",
    // "she doesn't live in Paris"): match the markers on its affirmative form.
    let affirmative = format!(
        " {} ",
        tokens
            .iter()
            .filter(|t| !matches!(t.as_str(), "not" | "no" | "longer"))
            .map(|t| t.strip_suffix("n't").unwrap_or(t))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // An attribute with a value: "the rate limit is 1000 req/min", "our SLA is 99.9%".
    let valued = tokens.windows(3).skip(1).find(|w| {
        matches!(w[0].as_str(), "is" | "are")
            && w[1..].iter().any(|t| t.chars().any(|c| c.is_ascii_digit()))
    });
    if let Some(marker) = DEFINITION_MARKERS
        .iter()
        .find(|m| lower.contains(*m) || affirmative.contains(*m))
    {
        scores.push((
            MemoryType::Semantic,
            1.5,
            format!("definitional statement (\"{}\")", marker.trim()),
        ));
    } else if let Some(window) = valued {
        scores.push((
            MemoryType::Semantic,
            1.5,
            format!("attribute with a value (\"{} {}\")", window[0], window[1]),
        ));
    } else if let Some(words) = factual_statement(text) {
        // Weaker than every other signal: "we deployed", "yesterday" or a how-to win.
        scores.push((
            MemoryType::Semantic,
            1.0,
            format!("present-tense statement of fact (\"{words}\")"),
        ));
    }

    scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    match scores.as_slice() {
        [] => RoutingDecision {
            memory_type: MemoryType::Episodic,
            reason: "no rule matched; stored as an experience".into(),
            ambiguous: true,
            valence: None,
            arousal: None,
        },
        [best, rest @ ..] => {
            let ambiguous = rest.first().is_some_and(|second| second.1 == best.1);
            let affective = best.0 == MemoryType::Affective;
            RoutingDecision {
                memory_type: best.0,
                reason: best.2.clone(),
                ambiguous,
                valence: if affective { valence } else { None },
                arousal: if affective { arousal } else { None },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> MemoryType {
        route(text).memory_type
    }

    #[test]
    fn each_type_has_its_rules() {
        assert_eq!(
            kind("Current task: migrate the billing tables"),
            MemoryType::Working
        );
        assert_eq!(kind("remind me to call Bob at five"), MemoryType::Working);
        assert_eq!(
            kind("How to deploy: build the image, push it, restart the pods"),
            MemoryType::Procedural
        );
        assert_eq!(
            kind("1. install rust\n2. run cargo build\n3. start the server"),
            MemoryType::Procedural
        );
        assert_eq!(
            kind("Install the CLI with cargo install mnemos"),
            MemoryType::Procedural
        );
        assert_eq!(
            kind("Yesterday we shipped the new search page"),
            MemoryType::Episodic
        );
        assert_eq!(kind("I fixed the flaky login test"), MemoryType::Episodic);
        assert_eq!(kind("Paris is the capital of France"), MemoryType::Semantic);
        assert_eq!(kind("The user prefers short answers"), MemoryType::Semantic);
        assert_eq!(
            kind("I am so frustrated with the build system"),
            MemoryType::Affective
        );
    }

    #[test]
    fn plain_statements_of_fact_are_knowledge() {
        for text in [
            "The staging DB runs on port 5433",
            "We deploy on Tuesdays.",
            "Alice owns the billing service",
            "Our API uses PostgreSQL 15",
            "Marco studies at ETH",
            "The cache expires every 10 minutes",
            "They usually meet on Mondays",
        ] {
            let decision = route(text);
            assert_eq!(
                decision.memory_type,
                MemoryType::Semantic,
                "{text}: {decision:?}"
            );
            assert!(
                decision
                    .reason
                    .starts_with("present-tense statement of fact")
                    || decision.reason.starts_with("definitional"),
                "{text}: {}",
                decision.reason
            );
        }
    }

    #[test]
    fn questions_instructions_the_past_and_vague_talk_are_not_facts() {
        for text in [
            "Does the staging DB run on port 5433?",
            "Run the migrations on staging first",
            "We will deploy on Tuesday",
            "I want to deploy",
            "that works for me",
            "it runs fine",
            "we need to talk",
        ] {
            assert!(factual_statement(text).is_none(), "{text}");
        }
        assert_eq!(
            kind("Yesterday we deployed the API on port 80"),
            MemoryType::Episodic
        );
        assert_eq!(
            kind("We deployed the API to Fly on Tuesday"),
            MemoryType::Episodic
        );
    }

    #[test]
    fn affective_memories_get_valence_and_arousal() {
        let happy = route("I'm really happy and excited about the launch");
        assert_eq!(happy.memory_type, MemoryType::Affective);
        assert!(happy.valence.unwrap() > 0.5);
        assert!(happy.arousal.unwrap() > 0.5);
        let sad = route("I feel sad and lonely");
        assert!(sad.valence.unwrap() < -0.5);
        assert!(route("Paris is the capital of France").valence.is_none());
    }

    #[test]
    fn attribute_statements_are_knowledge_even_when_negated() {
        assert_eq!(kind("I live in Paris"), MemoryType::Semantic);
        assert_eq!(kind("I work at Acme as an SRE"), MemoryType::Semantic);
        assert_eq!(kind("The rate limit is 1000 req/min"), MemoryType::Semantic);
        assert_eq!(kind("My favourite editor is vim"), MemoryType::Semantic);
        assert_eq!(kind("Bob is my manager"), MemoryType::Semantic);
        assert_eq!(kind("Bob is not my manager"), MemoryType::Semantic);
        assert_eq!(kind("Bob isn't my manager"), MemoryType::Semantic);
        assert_eq!(kind("She doesn't live in Paris"), MemoryType::Semantic);
        let valued = route("The rate limit is 1000 req/min");
        assert!(valued.reason.contains("is 1000"), "{}", valued.reason);
    }

    #[test]
    fn markers_match_whole_words_only() {
        assert_ne!(kind("I wiped the staging database"), MemoryType::Working);
        assert_eq!(kind("wip: the parser rewrite"), MemoryType::Working);
        assert_eq!(kind("The parser rewrite is wip"), MemoryType::Working);
        assert_ne!(kind("My stepson lives in Paris"), MemoryType::Procedural);
        assert_eq!(kind("My stepson lives in Paris"), MemoryType::Semantic);
        assert_eq!(
            kind("The release takes three steps"),
            MemoryType::Procedural
        );
    }

    #[test]
    fn negated_emotions_turn_valence_around() {
        for text in [
            "I don't love the new UI",
            "I wasn't happy with the review",
            "I was not happy with the review",
            "I didn\u{2019}t love the new UI",
        ] {
            let decision = route(text);
            assert_eq!(decision.memory_type, MemoryType::Affective, "{text}");
            assert!(decision.valence.unwrap() < 0.0, "{text}");
        }
    }

    #[test]
    fn reasons_are_readable_and_unmatched_text_is_ambiguous() {
        let decision = route("Yesterday we shipped it");
        assert!(decision.reason.contains("yesterday"), "{}", decision.reason);
        let unknown = route("blue");
        assert_eq!(unknown.memory_type, MemoryType::Episodic);
        assert!(unknown.ambiguous);
    }
}
