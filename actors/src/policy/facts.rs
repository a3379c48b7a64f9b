//! Facts over time, by rules (no model): the (subject, attribute, value) claims that
//! plain statements make ("Alice lives in Lisbon", "The staging DB runs on port 5433",
//! "My email is ana@example.org", "Bob no longer works at Acme"), and the timeline that
//! turns the claims of many memories into facts with validity windows.
//!
//! A claim is never a fact on its own: [`timeline`] orders every claim about one
//! subject and attribute by when its memory happened, so a later claim of another value
//! closes the earlier fact (its `valid_to` is when the later one began) instead of
//! deleting it, and a claim that something ended ("no longer", "moved out of", "sold")
//! closes the fact it names. Because validity is worked out from all the claims each
//! time, memories arriving out of order, or a rebuild, give the same history.
//!
//! The rules are about the shape of English statements, never about a dataset's names.
//! A subject is the whole start of a clause (a name, "I" as the speaker, or a short
//! noun phrase such as "the staging DB"); pronouns other than "I" are not resolved, so
//! "She moved to Paris" claims nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::model::MemoryId;
use crate::policy::entities::{entity_key, EntityMention};

/// How many values an attribute holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    /// One at a time: a new value closes the old one ("lives in", "works at", a port).
    One,
    /// Several at once: each value lasts until a claim ends it ("likes", "uses", "owns").
    Many,
}

/// How many values `attribute` holds at once. Attributes named by a possessive
/// ("Alice's email is …") hold one.
pub fn cardinality(attribute: &str) -> Cardinality {
    match attribute {
        "likes" | "prefers" | "uses" | "owns" => Cardinality::Many,
        _ => Cardinality::One,
    }
}

/// One claim a text makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FactClaim {
    /// The subject as written ("Alice", "staging DB"; the speaker for "I").
    pub subject: String,
    /// The subject's resolution key (an entity key when the subject is an entity).
    pub subject_key: String,
    /// What is said of it, snake case (`lives_in`, `works_at`, `port`, `email` …).
    pub attribute: String,
    /// The value as written.
    pub value: String,
    /// The value's resolution key (leading article dropped, lower case).
    pub value_key: String,
    /// Whether the value is an entity the text names (a relationship between entities).
    pub value_is_entity: bool,
    /// True when the claim says the fact ended ("no longer lives in Lisbon").
    pub ends: bool,
    /// Byte offset of the clause in the text.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

/// What a value must look like for a pattern to claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueRule {
    /// Any short phrase.
    Phrase,
    /// An entity the text names ("joined Acme", not "joined the call").
    Entity,
    /// A number ("port 5433").
    Number,
    /// Something with a digit ("version 2.3").
    Versionish,
}

/// One verb pattern: its words, the attribute it states, whether it ends the fact,
/// and what its value must be.
struct Pattern {
    /// Lower-case words, apostrophes straight.
    words: Vec<&'static str>,
    /// The attribute.
    attribute: &'static str,
    /// Whether it says the fact ended.
    ends: bool,
    /// What the value must be.
    value: ValueRule,
}

/// A family of verb phrases stating one attribute.
struct Family {
    /// The attribute.
    attribute: &'static str,
    /// Present forms that state it ("lives in", "is living in", "moved to").
    asserts: &'static [&'static str],
    /// Base forms negated to end it ("live in" → "no longer live in", "doesn't live in").
    bases: &'static [&'static str],
    /// Other phrases that end it ("moved out of").
    ends: &'static [&'static str],
    /// What its value must be.
    value: ValueRule,
}

/// Every attribute stated by a verb phrase.
const FAMILIES: &[Family] = &[
    Family {
        attribute: "lives_in",
        asserts: &[
            "lives in",
            "live in",
            "is living in",
            "am living in",
            "are living in",
            "moved to",
            "relocated to",
            "resides in",
            "reside in",
            "is based in",
            "am based in",
            "are based in",
        ],
        bases: &["live in", "lives in", "reside in", "resides in"],
        ends: &["moved out of", "moved away from"],
        value: ValueRule::Phrase,
    },
    Family {
        attribute: "works_at",
        asserts: &[
            "works at",
            "works for",
            "work at",
            "work for",
            "is working at",
            "am working at",
            "is working for",
            "am working for",
            "is employed by",
            "am employed by",
            "started working at",
            "started working for",
            "joined",
        ],
        bases: &["work at", "work for", "works at", "works for"],
        ends: &["left", "quit", "stopped working at", "stopped working for"],
        value: ValueRule::Phrase,
    },
    Family {
        attribute: "port",
        asserts: &[
            "runs on port",
            "run on port",
            "listens on port",
            "listen on port",
            "is on port",
            "uses port",
        ],
        bases: &[],
        ends: &[],
        value: ValueRule::Number,
    },
    Family {
        attribute: "version",
        asserts: &[
            "is on version",
            "is at version",
            "runs version",
            "was upgraded to version",
            "was upgraded to",
        ],
        bases: &[],
        ends: &[],
        value: ValueRule::Versionish,
    },
    Family {
        attribute: "uses",
        asserts: &[
            "uses",
            "use",
            "is using",
            "am using",
            "are using",
            "switched to",
        ],
        bases: &["use", "uses"],
        ends: &["stopped using"],
        value: ValueRule::Phrase,
    },
    Family {
        attribute: "owns",
        asserts: &["owns", "own", "bought", "adopted"],
        bases: &["own", "owns"],
        ends: &["sold", "gave away"],
        value: ValueRule::Phrase,
    },
    Family {
        attribute: "likes",
        asserts: &["likes", "like", "loves", "love", "enjoys", "enjoy"],
        bases: &["like", "likes", "love", "loves", "enjoy", "enjoys"],
        ends: &[],
        value: ValueRule::Phrase,
    },
    Family {
        attribute: "prefers",
        asserts: &["prefers", "prefer"],
        bases: &["prefer", "prefers"],
        ends: &[],
        value: ValueRule::Phrase,
    },
];

/// Every verb pattern, longest first, so "is living in" wins over "is".
static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let mut patterns = Vec::new();
    let mut add = |phrase: String, family: &Family, ends: bool| {
        let words: Vec<&'static str> = phrase
            .split(' ')
            .map(|w| &*Box::leak(w.to_string().into_boxed_str()))
            .collect();
        // "joined", "left", "quit", "bought" alone would take any object: a
        // relationship to an organisation needs the value to be a name.
        let value = if matches!(words.as_slice(), ["joined"] | ["left"] | ["quit"]) {
            ValueRule::Entity
        } else {
            family.value
        };
        patterns.push(Pattern {
            words,
            attribute: family.attribute,
            ends,
            value,
        });
    };
    for family in FAMILIES {
        for phrase in family.asserts {
            add(phrase.to_string(), family, false);
        }
        for phrase in family.ends {
            add(phrase.to_string(), family, true);
        }
        for base in family.bases {
            for negation in ["no longer", "doesn't", "does not", "don't", "do not"] {
                add(format!("{negation} {base}"), family, true);
            }
        }
    }
    patterns.sort_by_key(|p| std::cmp::Reverse(p.words.len()));
    patterns
});

/// Words that may stand between a subject and its verb ("Alice now lives in …").
const ADVERBS: &[&str] = &[
    "now",
    "currently",
    "still",
    "also",
    "actually",
    "just",
    "recently",
    "finally",
    "officially",
];

/// Words that open a clause before its subject ("So, Alice lives …").
const OPENERS: &[&str] = &[
    "so",
    "and",
    "also",
    "btw",
    "fyi",
    "update",
    "note",
    "now",
    "later",
    "then",
    "today",
    "yesterday",
    "recently",
    "meanwhile",
    "finally",
    "anyway",
];

/// Subjects that need a referent the rules do not resolve.
const PRONOUNS: &[&str] = &[
    "he", "she", "they", "it", "we", "you", "this", "that", "there", "these", "those", "who",
    "which", "what", "everyone", "someone", "nobody", "people",
];

/// Words that end a value phrase (a new clause, a time or a place adjunct).
const VALUE_STOPS: &[&str] = &[
    "in",
    "on",
    "at",
    "since",
    "from",
    "until",
    "because",
    "and",
    "but",
    "with",
    "for",
    "when",
    "after",
    "before",
    "last",
    "this",
    "next",
    "yesterday",
    "today",
    "now",
    "anymore",
    "any",
    "so",
    "while",
    "as",
    "which",
    "who",
    "that",
    "than",
    "over",
    "to",
    "again",
    "too",
    "though",
    "although",
    "if",
    "or",
    "every",
    "during",
    "by",
];

/// Most words a value phrase (not an entity) takes.
const MAX_VALUE_WORDS: usize = 5;
/// Most words a noun-phrase subject takes.
const MAX_SUBJECT_WORDS: usize = 4;

/// A word of a clause with its byte span in the whole text.
#[derive(Debug, Clone)]
struct Word {
    /// Lower case, apostrophes straight, surrounding punctuation gone.
    norm: String,
    /// As written, surrounding punctuation gone.
    text: String,
    /// Byte offset of the word (punctuation excluded).
    start: usize,
    /// Byte offset just past it.
    end: usize,
    /// Whether punctuation that ends a phrase (`,;:`) follows it.
    breaks: bool,
}

/// The words of `clause` (which starts at byte `offset` of the text).
fn clause_words(clause: &str, offset: usize) -> Vec<Word> {
    let mut out = Vec::new();
    let mut at = 0;
    for raw in clause.split_whitespace() {
        let rel = clause[at..].find(raw).map_or(at, |p| p + at);
        at = rel + raw.len();
        let trimmed_start = raw.len() - raw.trim_start_matches(['"', '(', '[', '\'']).len();
        let core = raw.trim_start_matches(['"', '(', '[', '\'']);
        let core_trimmed = core.trim_end_matches(|c: char| {
            matches!(c, ',' | ';' | ':' | '"' | ')' | ']' | '!' | '?' | '.')
        });
        // A trailing full stop belongs to a version or an abbreviation only inside it.
        let breaks = core_trimmed.len() < core.len();
        if core_trimmed.is_empty() {
            continue;
        }
        let start = offset + rel + trimmed_start;
        out.push(Word {
            norm: core_trimmed.replace('\u{2019}', "'").to_lowercase(),
            text: core_trimmed.to_string(),
            start,
            end: start + core_trimmed.len(),
            breaks,
        });
    }
    out
}

/// The clauses of `text` with their byte offsets: split at sentence ends, line breaks
/// and semicolons (a full stop inside "v2.3" or "a@b.io" is not an end).
fn clauses(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        let ends = match c {
            '\n' | ';' => true,
            '.' | '!' | '?' => bytes
                .get(i + 1)
                .is_none_or(|next| next.is_ascii_whitespace()),
            _ => false,
        };
        if ends {
            if i > start {
                out.push((start, &text[start..i]));
            }
            start = i + c.len_utf8();
        }
    }
    if start < text.len() {
        out.push((start, &text[start..]));
    }
    out
}

/// The key of a value phrase: leading article gone, the entity key's normalisation.
fn value_key(value: &str) -> String {
    let key = entity_key(value);
    for article in ["the ", "a ", "an ", "my ", "our ", "his ", "her ", "their "] {
        if let Some(rest) = key.strip_prefix(article) {
            return rest.to_string();
        }
    }
    key
}

/// The claims `text` makes. `mentions` are its entities ([`crate::policy::entities::extract`]);
/// `speaker` is who says it (the memory's speaker), the subject of "I" and "my" when
/// the text has no transcript label of its own ("user" when neither is known).
pub fn extract_facts(
    text: &str,
    mentions: &[EntityMention],
    speaker: Option<&str>,
) -> Vec<FactClaim> {
    let mut out = Vec::new();
    for (offset, clause) in clauses(text) {
        let (clause_speaker, body_offset, body) =
            match crate::policy::fusion::speaker_label(clause.trim_start()) {
                Some(label) => {
                    let colon = clause.find(':').map_or(0, |p| p + 1);
                    (Some(label), offset + colon, &clause[colon..])
                }
                None => (speaker, offset, clause),
            };
        let words = clause_words(body, body_offset);
        if let Some(claim) = clause_claim(&words, mentions, clause_speaker) {
            out.push(claim);
        }
    }
    out
}

/// The entity mention spanning exactly words `from..to`, if any.
fn mention_over<'a>(
    words: &[Word],
    from: usize,
    to: usize,
    mentions: &'a [EntityMention],
) -> Option<&'a EntityMention> {
    let (start, end) = (words.get(from)?.start, words.get(to.checked_sub(1)?)?.end);
    mentions
        .iter()
        .find(|m| m.start == start && (m.end == end || m.end + 2 == end || m.end + 1 == end))
}

/// The entity mention starting at word `at`, and the index of the word past it.
fn mention_from(
    words: &[Word],
    at: usize,
    mentions: &[EntityMention],
) -> Option<(usize, EntityMention)> {
    let start = words.get(at)?.start;
    let mention = mentions.iter().find(|m| m.start == start)?;
    let past = words
        .iter()
        .position(|w| w.end >= mention.end && w.start >= start)
        .map_or(words.len(), |i| i + 1);
    Some((past, mention.clone()))
}

/// The subject of a clause whose subject is `words` (the words before the verb).
fn subject_of(
    words: &[Word],
    mentions: &[EntityMention],
    speaker: Option<&str>,
) -> Option<(String, String)> {
    let mut from = 0;
    while from < words.len().saturating_sub(1)
        && OPENERS.contains(&words[from].norm.as_str())
        && words[from].breaks
    {
        from += 1;
    }
    let words = &words[from..];
    match words {
        [] => None,
        [only] if only.norm == "i" => {
            let who = speaker.unwrap_or("user");
            Some((who.to_string(), entity_key(who)))
        }
        _ => {
            if words.iter().any(|w| w.breaks)
                && !words.last().is_some_and(|w| w.norm.ends_with("'s"))
            {
                return None;
            }
            if let Some(mention) = mention_over(words, 0, words.len(), mentions).or_else(|| {
                mention_over(words, 1, words.len(), mentions).filter(|_| words[0].norm == "the")
            }) {
                return Some((mention.surface.clone(), mention.key.clone()));
            }
            let phrase = if words[0].norm == "the" {
                &words[1..]
            } else {
                words
            };
            let plain = !phrase.is_empty()
                && phrase.len() <= MAX_SUBJECT_WORDS
                && !PRONOUNS.contains(&phrase[0].norm.as_str())
                && phrase.iter().all(|w| {
                    w.norm
                        .chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
                        && !crate::text::is_stopword(&w.norm)
                });
            plain.then(|| {
                let surface = phrase
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                (surface.clone(), entity_key(&surface))
            })
        }
    }
}

/// The value starting at word `at` under `rule`, with whether it is an entity.
fn value_at(
    words: &[Word],
    at: usize,
    mentions: &[EntityMention],
    rule: ValueRule,
    text_of: impl Fn(usize, usize) -> String,
) -> Option<(String, bool)> {
    let first = words.get(at)?;
    match rule {
        ValueRule::Number => first
            .norm
            .chars()
            .all(|c| c.is_ascii_digit())
            .then(|| (first.norm.clone(), false)),
        ValueRule::Versionish => {
            let v = first.norm.trim_start_matches('v');
            (v.chars().next().is_some_and(|c| c.is_ascii_digit())
                || first.norm.chars().any(|c| c.is_ascii_digit()))
            .then(|| (text_of(first.start, first.end), false))
        }
        ValueRule::Entity | ValueRule::Phrase => {
            let skip_article = matches!(first.norm.as_str(), "the" | "a" | "an");
            for start in [at, at + 1] {
                if start == at + 1 && !skip_article {
                    break;
                }
                if let Some((_, mention)) = mention_from(words, start, mentions) {
                    return Some((mention.surface, true));
                }
            }
            if rule == ValueRule::Entity {
                return None;
            }
            let mut end = at;
            while end < words.len() && end - at < MAX_VALUE_WORDS {
                if end > at && VALUE_STOPS.contains(&words[end].norm.as_str()) {
                    break;
                }
                end += 1;
                if words[end - 1].breaks {
                    break;
                }
            }
            // A value of only articles or stop words says nothing.
            let meaningful = words[at..end].iter().any(|w| {
                !crate::text::is_stopword(&w.norm) && !VALUE_STOPS.contains(&w.norm.as_str())
            });
            meaningful.then(|| (text_of(words[at].start, words[end - 1].end), false))
        }
    }
}

/// The claim of one clause (its first verb pattern after a subject), if any.
fn clause_claim(
    words: &[Word],
    mentions: &[EntityMention],
    speaker: Option<&str>,
) -> Option<FactClaim> {
    // The words between two byte offsets as written (single spaces).
    let surface = |start: usize, end: usize| -> String {
        words
            .iter()
            .filter(|w| w.start >= start && w.end <= end)
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    if let Some(claim) = possessive_claim(words, mentions, speaker, &surface) {
        return Some(claim);
    }
    for verb_at in 1..words.len() {
        for pattern in PATTERNS.iter() {
            let n = pattern.words.len();
            if verb_at + n > words.len() {
                continue;
            }
            let matches = pattern
                .words
                .iter()
                .zip(&words[verb_at..verb_at + n])
                .all(|(p, w)| *p == w.norm);
            if !matches || words[verb_at..verb_at + n - 1].iter().any(|w| w.breaks) {
                continue;
            }
            let mut subject_end = verb_at;
            while subject_end > 1 && ADVERBS.contains(&words[subject_end - 1].norm.as_str()) {
                subject_end -= 1;
            }
            let (subject, subject_key) = subject_of(&words[..subject_end], mentions, speaker)?;
            let (value, value_is_entity) =
                value_at(words, verb_at + n, mentions, pattern.value, surface)?;
            let key = value_key(&value);
            if key.is_empty() || key == subject_key {
                return None;
            }
            return Some(FactClaim {
                subject,
                subject_key,
                attribute: pattern.attribute.to_string(),
                value,
                value_key: key,
                value_is_entity,
                ends: pattern.ends,
                start: words[0].start,
                end: words.last().map_or(words[0].end, |w| w.end),
            });
        }
    }
    None
}

/// "Alice's email is …", "My phone number is …", "The port of the staging DB is …".
fn possessive_claim(
    words: &[Word],
    mentions: &[EntityMention],
    speaker: Option<&str>,
    surface: &impl Fn(usize, usize) -> String,
) -> Option<FactClaim> {
    let is_at = words
        .iter()
        .position(|w| matches!(w.norm.as_str(), "is" | "are"))?;
    if !(2..=7).contains(&is_at) {
        return None;
    }
    let head = &words[..is_at];
    let (subject, subject_key, attribute_words) = if head[0].norm == "my" {
        let who = speaker.unwrap_or("user");
        (who.to_string(), entity_key(who), &head[1..])
    } else if let Some(owner_end) = head.iter().position(|w| w.norm.ends_with("'s")) {
        let owner = &head[..=owner_end];
        let mut owner_words: Vec<Word> = owner.to_vec();
        if let Some(last) = owner_words.last_mut() {
            last.norm.truncate(last.norm.len() - 2);
            let cut = last.text.len().saturating_sub(2);
            last.text.truncate(cut);
            last.end -= 2;
            last.breaks = false;
        }
        let (subject, key) = subject_of(&owner_words, mentions, speaker)?;
        (subject, key, &head[owner_end + 1..])
    } else if let Some(of_at) = head.iter().position(|w| w.norm == "of") {
        // "The <attribute> of <subject> is …"
        if head[0].norm != "the" || of_at < 2 {
            return None;
        }
        let (subject, key) = subject_of(&head[of_at + 1..], mentions, speaker)?;
        (subject, key, &head[1..of_at])
    } else {
        return None;
    };
    if attribute_words.is_empty()
        || attribute_words.len() > 3
        || attribute_words
            .iter()
            .any(|w| w.breaks || !w.norm.chars().all(|c| c.is_alphanumeric() || c == '-'))
    {
        return None;
    }
    let attribute = attribute_words
        .iter()
        .map(|w| w.norm.replace('-', "_"))
        .collect::<Vec<_>>()
        .join("_");
    let mut value_from = is_at + 1;
    while value_from < words.len()
        && matches!(
            words[value_from].norm.as_str(),
            "now" | "currently" | "still"
        )
    {
        value_from += 1;
    }
    let first = words.get(value_from)?;
    // "Alice's plan is to …" or "my guess is that …" states no value.
    if matches!(
        first.norm.as_str(),
        "to" | "that" | "not" | "being" | "going"
    ) {
        return None;
    }
    let (value, value_is_entity) = match mention_from(words, value_from, mentions) {
        Some((_, mention)) => (mention.surface, true),
        None => {
            let mut end = value_from;
            while end < words.len() && end - value_from < MAX_VALUE_WORDS + 1 {
                end += 1;
                if words[end - 1].breaks {
                    break;
                }
            }
            (surface(first.start, words[end - 1].end), false)
        }
    };
    let key = value_key(&value);
    (!key.is_empty()).then(|| FactClaim {
        subject,
        subject_key,
        attribute,
        value,
        value_key: key,
        value_is_entity,
        ends: false,
        start: words[0].start,
        end: words.last().map_or(words[0].end, |w| w.end),
    })
}

/// A claim as stored: what a memory said, and when that memory happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactObservation {
    /// The subject's key.
    pub subject_key: String,
    /// The subject as written.
    pub subject: String,
    /// The attribute.
    pub attribute: String,
    /// The value as written.
    pub value: String,
    /// The value's key.
    pub value_key: String,
    /// Whether the value is an entity.
    pub value_is_entity: bool,
    /// Whether the claim ends the fact.
    pub ends: bool,
    /// When the memory making it happened: when the claim became known.
    pub observed_at: DateTime<Utc>,
    /// The memory making it.
    pub memory_id: MemoryId,
}

/// A fact with its validity window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    /// The subject's key.
    pub subject_key: String,
    /// The subject as the first claim wrote it.
    pub subject: String,
    /// The attribute.
    pub attribute: String,
    /// The value as the first claim wrote it.
    pub value: String,
    /// The value's key.
    pub value_key: String,
    /// Whether the value is an entity.
    pub value_is_entity: bool,
    /// When the first claim of it happened.
    pub valid_from: DateTime<Utc>,
    /// When a later claim replaced or ended it; None while it holds.
    pub valid_to: Option<DateTime<Utc>>,
    /// The memories that claim it, oldest first.
    pub sources: Vec<MemoryId>,
    /// The memory whose claim closed it.
    pub closed_by: Option<MemoryId>,
}

impl Fact {
    /// Whether it held at `at` (from `valid_from`, up to but not including `valid_to`).
    pub fn valid_at(&self, at: DateTime<Utc>) -> bool {
        self.valid_from <= at && self.valid_to.is_none_or(|to| at < to)
    }

    /// Whether it held at some time from `start` up to but not including `end`.
    pub fn valid_during(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> bool {
        self.valid_from < end && self.valid_to.is_none_or(|to| start < to)
    }
}

/// The facts the claims add up to, by subject, attribute and start. Claims about one
/// subject and attribute are taken in the order their memories happened (ties by
/// memory id); for a [`Cardinality::One`] attribute a claim of another value closes
/// the open fact and opens its own, for [`Cardinality::Many`] each value is open until
/// a claim ends it. A repeated claim adds its memory to the fact's sources.
pub fn timeline(observations: &[FactObservation]) -> Vec<Fact> {
    let mut groups: BTreeMap<(&str, &str), Vec<&FactObservation>> = BTreeMap::new();
    for o in observations {
        groups
            .entry((o.subject_key.as_str(), o.attribute.as_str()))
            .or_default()
            .push(o);
    }
    let mut out = Vec::new();
    for ((_, attribute), mut claims) in groups {
        claims.sort_by(|a, b| {
            a.observed_at
                .cmp(&b.observed_at)
                .then_with(|| a.memory_id.0.cmp(&b.memory_id.0))
        });
        let open_fact = |o: &FactObservation| Fact {
            subject_key: o.subject_key.clone(),
            subject: o.subject.clone(),
            attribute: o.attribute.clone(),
            value: o.value.clone(),
            value_key: o.value_key.clone(),
            value_is_entity: o.value_is_entity,
            valid_from: o.observed_at,
            valid_to: None,
            sources: vec![o.memory_id.clone()],
            closed_by: None,
        };
        let close = |mut fact: Fact, o: &FactObservation| {
            fact.valid_to = Some(o.observed_at);
            fact.closed_by = Some(o.memory_id.clone());
            fact
        };
        // Open facts by value key (one at most for a one-valued attribute).
        let mut open: HashMap<String, Fact> = HashMap::new();
        let mut closed = Vec::new();
        for claim in claims {
            if claim.ends {
                if let Some(fact) = open.remove(&claim.value_key) {
                    closed.push(close(fact, claim));
                }
                continue;
            }
            if let Some(fact) = open.get_mut(&claim.value_key) {
                if !fact.sources.contains(&claim.memory_id) {
                    fact.sources.push(claim.memory_id.clone());
                }
                continue;
            }
            if cardinality(attribute) == Cardinality::One {
                for (_, fact) in open.drain() {
                    closed.push(close(fact, claim));
                }
            }
            open.insert(claim.value_key.clone(), open_fact(claim));
        }
        closed.extend(open.into_values());
        closed.sort_by(|a, b| {
            a.valid_from
                .cmp(&b.valid_from)
                .then_with(|| a.value_key.cmp(&b.value_key))
        });
        out.extend(closed);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::entities::extract;
    use chrono::TimeZone;
    use std::collections::HashSet;

    fn claims(text: &str) -> Vec<(String, String, String, bool)> {
        claims_by(text, None)
    }

    fn claims_by(text: &str, speaker: Option<&str>) -> Vec<(String, String, String, bool)> {
        let mentions = extract(text, &HashSet::new());
        extract_facts(text, &mentions, speaker)
            .into_iter()
            .map(|c| (c.subject_key, c.attribute, c.value_key, c.ends))
            .collect()
    }

    fn claim(s: &str, a: &str, v: &str, ends: bool) -> (String, String, String, bool) {
        (s.into(), a.into(), v.into(), ends)
    }

    #[test]
    fn plain_statements_make_claims() {
        assert_eq!(
            claims("Alice lives in Lisbon."),
            [claim("alice", "lives_in", "lisbon", false)]
        );
        assert_eq!(
            claims("Alice moved to New York in March 2023."),
            [claim("alice", "lives_in", "new york", false)]
        );
        assert_eq!(
            claims("Bob works at Acme Corp, on the payments team."),
            [claim("bob", "works_at", "acme corp", false)]
        );
        assert_eq!(
            claims("The staging DB runs on port 5433."),
            [claim("staging db", "port", "5433", false)]
        );
        assert_eq!(
            claims("Alice now prefers dark mode."),
            [claim("alice", "prefers", "dark mode", false)]
        );
        assert_eq!(
            claims("Dana joined Initech last week."),
            [claim("dana", "works_at", "initech", false)]
        );
    }

    #[test]
    fn endings_and_negations_end_facts() {
        assert_eq!(
            claims("Bob no longer works at Acme."),
            [claim("bob", "works_at", "acme", true)]
        );
        assert_eq!(
            claims("Alice doesn't live in Lisbon anymore."),
            [claim("alice", "lives_in", "lisbon", true)]
        );
        assert_eq!(
            claims("Carol sold her bike."),
            [claim("carol", "owns", "bike", true)]
        );
        assert_eq!(
            claims("Bob left Acme in May."),
            [claim("bob", "works_at", "acme", true)]
        );
    }

    #[test]
    fn first_person_is_the_speaker_or_the_user() {
        assert_eq!(
            claims_by("I live in Porto now.", Some("Maria")),
            [claim("maria", "lives_in", "porto", false)]
        );
        assert_eq!(
            claims("I work at Globex."),
            [claim("user", "works_at", "globex", false)]
        );
        // A transcript label says who "I" is.
        assert_eq!(
            claims("Caroline: I moved to Denver last month."),
            [claim("caroline", "lives_in", "denver", false)]
        );
        assert_eq!(
            claims_by("My email is maria@example.org", Some("Maria")),
            [claim("maria", "email", "maria@example.org", false)]
        );
    }

    #[test]
    fn possessives_name_attributes() {
        assert_eq!(
            claims("Alice's phone number is 555-0100."),
            [claim("alice", "phone_number", "555-0100", false)]
        );
        assert_eq!(
            claims("The port of the staging DB is 5433."),
            [claim("staging db", "port", "5433", false)]
        );
        // A plan or a guess is not a value.
        assert!(claims("Alice's plan is to move to Rome.").is_empty());
    }

    #[test]
    fn what_is_not_a_plain_claim_claims_nothing() {
        for text in [
            "She moved to Paris.",                  // unresolved pronoun
            "We use Postgres.",                     // "we" has no referent here
            "The friend who lives in Rome called.", // subordinate clause
            "Does Alice live in Lisbon?",           // a question has no subject first
            "Alice joined the call.",               // "joined" needs a name
            "Port 5433 is open.",
            "I like it.", // only a pronoun as value
        ] {
            assert!(claims(text).is_empty(), "{text}: {:?}", claims(text));
        }
    }

    #[test]
    fn several_clauses_make_several_claims() {
        assert_eq!(
            claims("Alice lives in Lisbon; Bob lives in Porto.\nCarol uses Vim."),
            [
                claim("alice", "lives_in", "lisbon", false),
                claim("bob", "lives_in", "porto", false),
                claim("carol", "uses", "vim", false),
            ]
        );
    }

    fn obs(value: &str, attribute: &str, ends: bool, day: u32, id: &str) -> FactObservation {
        FactObservation {
            subject_key: "alice".into(),
            subject: "Alice".into(),
            attribute: attribute.into(),
            value: value.into(),
            value_key: value.to_lowercase(),
            value_is_entity: true,
            ends,
            observed_at: Utc.with_ymd_and_hms(2023, 1, day, 0, 0, 0).unwrap(),
            memory_id: MemoryId(id.into()),
        }
    }

    fn day(d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2023, 1, d, 0, 0, 0).unwrap()
    }

    #[test]
    fn a_new_value_closes_the_old_fact_and_keeps_it() {
        // Out of order on purpose: validity comes from when each memory happened.
        let facts = timeline(&[
            obs("Porto", "lives_in", false, 20, "m3"),
            obs("Lisbon", "lives_in", false, 1, "m1"),
            obs("Lisbon", "lives_in", false, 5, "m2"),
        ]);
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[0].value, "Lisbon");
        assert_eq!(facts[0].valid_from, day(1));
        assert_eq!(facts[0].valid_to, Some(day(20)));
        assert_eq!(
            facts[0].sources,
            [MemoryId("m1".into()), MemoryId("m2".into())]
        );
        assert_eq!(facts[0].closed_by, Some(MemoryId("m3".into())));
        assert_eq!(facts[1].value, "Porto");
        assert_eq!(facts[1].valid_to, None);
        assert!(facts[0].valid_at(day(10)) && !facts[1].valid_at(day(10)));
        assert!(!facts[0].valid_at(day(20)) && facts[1].valid_at(day(20)));
        assert!(facts
            .iter()
            .all(|f| !f.valid_at(Utc.with_ymd_and_hms(2022, 12, 31, 0, 0, 0).unwrap())));
        // A period sees every fact that held at some time in it.
        assert!(facts[0].valid_during(day(15), day(25)) && facts[1].valid_during(day(15), day(25)));
        assert!(!facts[1].valid_during(day(2), day(20)));
    }

    #[test]
    fn many_valued_attributes_end_one_value_at_a_time() {
        let facts = timeline(&[
            obs("tea", "likes", false, 1, "m1"),
            obs("chess", "likes", false, 2, "m2"),
            obs("tea", "likes", true, 9, "m3"),
        ]);
        let tea = facts.iter().find(|f| f.value == "tea").unwrap();
        let chess = facts.iter().find(|f| f.value == "chess").unwrap();
        assert_eq!(tea.valid_to, Some(day(9)));
        assert_eq!(chess.valid_to, None);
        // An ending of something never claimed closes nothing.
        let facts = timeline(&[obs("coffee", "likes", true, 3, "m9")]);
        assert!(facts.is_empty());
    }

    #[test]
    fn an_ended_fact_can_start_again() {
        let facts = timeline(&[
            obs("Acme", "works_at", false, 1, "m1"),
            obs("Acme", "works_at", true, 5, "m2"),
            obs("Acme", "works_at", false, 9, "m3"),
        ]);
        assert_eq!(facts.len(), 2);
        assert_eq!(
            (facts[0].valid_from, facts[0].valid_to),
            (day(1), Some(day(5)))
        );
        assert_eq!((facts[1].valid_from, facts[1].valid_to), (day(9), None));
    }
}
