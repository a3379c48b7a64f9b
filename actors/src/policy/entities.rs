//! Who and what a text is about, by rules (no model): people and speakers, capitalised
//! and multi-word names, organisations, places, products, quoted titles, @handles,
//! emails, URLs, file paths, versions and dates. Pure: the same text (and the same
//! known names) always gives the same mentions, with byte spans into the text.
//!
//! The rules are about the shape of English text, never about a dataset's names:
//! a capitalised word is a name unless it only starts a sentence and nothing else
//! says it is one (a possessive, a person's verb, the same word capitalised elsewhere,
//! or a name the agent already knows).

use std::collections::HashSet;

use serde::Serialize;

use crate::text::is_stopword;

/// What kind of thing an entity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// A person (a speaker, a name with a person's cue).
    Person,
    /// A company, team, school, institution.
    Organization,
    /// A city, country, street, park …
    Place,
    /// Software, a device, a product (often with a version or after "using").
    Product,
    /// A quoted title of a book, film, song, talk, document.
    Title,
    /// An @handle.
    Handle,
    /// An email address.
    Email,
    /// A web address.
    Url,
    /// A file or directory path, or a file name with a known extension.
    Path,
    /// A version ("v2.3.1", "1.4.0").
    Version,
    /// A calendar date ("8 May 2023", "2023-05-08", "March 2024").
    Date,
    /// A name whose kind the text does not say.
    Name,
}

impl EntityKind {
    /// The wire name (`person`, `organization`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Person => "person",
            Self::Organization => "organization",
            Self::Place => "place",
            Self::Product => "product",
            Self::Title => "title",
            Self::Handle => "handle",
            Self::Email => "email",
            Self::Url => "url",
            Self::Path => "path",
            Self::Version => "version",
            Self::Date => "date",
            Self::Name => "name",
        }
    }

    /// The kind of a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "person" => Self::Person,
            "organization" => Self::Organization,
            "place" => Self::Place,
            "product" => Self::Product,
            "title" => Self::Title,
            "handle" => Self::Handle,
            "email" => Self::Email,
            "url" => Self::Url,
            "path" => Self::Path,
            "version" => Self::Version,
            "date" => Self::Date,
            "name" => Self::Name,
            _ => return None,
        })
    }
}

/// One entity named in a text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntityMention {
    /// The words as the text wrote them (possessive and honorific left out).
    pub surface: String,
    /// The key entities are resolved by: lower case, single spaces.
    pub key: String,
    /// What it is.
    pub kind: EntityKind,
    /// Byte offset of the mention in the text.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

/// The resolution key of a surface form: lower case, single spaces, no surrounding
/// punctuation.
pub fn entity_key(surface: &str) -> String {
    surface
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '@' && c != '/' && c != '~')
        .to_lowercase()
}

/// A whitespace-separated token of the text, with its byte span.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    /// The raw token.
    raw: &'a str,
    /// Byte offset.
    start: usize,
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push(Token {
                    raw: &text[s..i],
                    start: s,
                });
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(Token {
            raw: &text[s..],
            start: s,
        });
    }
    out
}

/// Punctuation that may wrap a token without belonging to it.
fn is_wrapping(c: char) -> bool {
    matches!(
        c,
        '.' | ','
            | ';'
            | ':'
            | '!'
            | '?'
            | '('
            | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | '"'
            | '\''
            | '`'
            | '<'
            | '>'
            | '*'
            | '\u{201c}'
            | '\u{201d}'
            | '\u{2018}'
            | '\u{2019}'
    )
}

/// The token without wrapping punctuation, with its byte span.
fn core(token: Token<'_>) -> (&str, usize, usize) {
    let trimmed_start = token.raw.trim_start_matches(is_wrapping);
    let offset = token.raw.len() - trimmed_start.len();
    let trimmed = trimmed_start.trim_end_matches(is_wrapping);
    let start = token.start + offset;
    (trimmed, start, start + trimmed.len())
}

/// File extensions that make `name.ext` a file name.
#[rustfmt::skip]
const FILE_EXTENSIONS: &[&str] = &[
    "c", "cc", "cfg", "conf", "cpp", "cs", "css", "csv", "db", "dockerfile", "env", "go", "gradle",
    "h", "hpp", "html", "ini", "ipynb", "java", "js", "json", "jsx", "kt", "lock", "log", "md",
    "mjs", "php", "pdf", "png", "proto", "py", "rb", "rs", "scss", "service", "sh", "sql", "svg",
    "swift", "tf", "toml", "ts", "tsx", "txt", "xml", "yaml", "yml", "zip",
];

#[rustfmt::skip]
const MONTHS: &[&str] = &[
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec",
];

#[rustfmt::skip]
const WEEKDAYS: &[&str] = &[
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mondays",
    "tuesdays", "wednesdays", "thursdays", "fridays", "saturdays", "sundays",
];

/// Capitalised words that start sentences without naming anything.
#[rustfmt::skip]
const COMMON_CAPITALISED: &[&str] = &[
    "actually", "add", "after", "again", "ah", "also", "always", "anyway", "apparently", "around",
    "as", "awesome", "aww", "basically", "because", "before", "besides", "btw", "but", "by", "can",
    "check", "congrats", "congratulations", "could", "currently", "deploy", "did", "do", "does",
    "don't", "done", "each", "either", "even", "eventually", "every", "everyone", "everything",
    "exactly", "finally", "first", "fix", "for", "fortunately", "from", "generally", "glad", "go",
    "good", "great", "guess", "had", "has", "have", "haha", "he", "hello", "her", "here", "hey",
    "hi", "his", "honestly", "hope", "how", "however", "i", "i'd", "i'll", "i'm", "i've", "if",
    "in", "instead", "is", "it", "it's", "its", "just", "last", "later", "let", "let's", "like",
    "lol", "look", "looks", "made", "make", "many", "maybe", "me", "meanwhile", "might", "more",
    "most", "my", "never", "next", "nice", "no", "nope", "not", "note", "nothing", "now", "of",
    "oh", "ok", "okay", "on", "once", "one", "only", "oops", "or", "our", "please", "plus",
    "probably", "really", "remember", "right", "run", "see", "she", "should", "since", "so",
    "some", "someone", "something", "sometimes", "sorry", "sounds", "still", "sure", "thank",
    "thanks", "that", "that's", "the", "their", "then", "there", "there's", "these", "they",
    "this", "those", "though", "to", "today", "together", "tomorrow", "tonight", "totally", "two",
    "ugh", "unfortunately", "until", "update", "use", "usually", "very", "wait", "was", "we",
    "we'll", "we're", "we've", "well", "were", "what", "what's", "when", "where", "whether",
    "which", "while", "who", "why", "will", "with", "without", "wow", "yay", "yeah", "yes",
    "yesterday", "yet", "you", "you're", "your", "yup", "also", "new", "old", "our", "set", "keep",
    "make", "try", "send", "write", "read", "open", "close", "install", "restart", "start", "stop",
    "create", "delete", "remove", "merge", "ship", "build", "test", "review", "call", "email",
    "ask", "tell", "get", "give", "put", "take", "bring", "buy", "book", "switch", "move",
    "change", "upgrade", "enable", "disable", "turn", "pick", "follow", "reply", "wanted", "went",
    "got", "saw", "met", "sent", "found", "started", "finished", "tried", "spent", "having",
    "being", "going", "looking", "working", "thinking", "planning", "trying", "getting", "making",
    "taking", "feeling", "loving",
];

/// Generic upper-case abbreviations that name no entity.
#[rustfmt::skip]
const GENERIC_ACRONYMS: &[&str] = &[
    "AI", "AM", "API", "APIS", "ASAP", "CD", "CEO", "CFO", "CI", "CLI", "COO", "CPU", "CSS", "CSV",
    "CTO", "DB", "DM", "DNS", "ETA", "FAQ", "FYI", "GPU", "HR", "HTML", "HTTP", "HTTPS", "ID",
    "IDE", "IO", "IP", "JSON", "LLM", "ML", "MVP", "OK", "OS", "PDF", "PM", "PR", "PRS", "QA",
    "RAM", "SDK", "SQL", "SSD", "SSH", "SSL", "TBD", "TCP", "TLS", "TODO", "TV", "UDP", "UI",
    "URL", "USB", "UX", "VM", "VP", "XML", "YAML", "LGTM", "IMO", "TL", "DR", "RSVP", "UTC", "GMT",
    "ADR", "SLA", "SLO", "SLI", "PII", "README", "DPO", "SSO", "PRS", "KPI", "OKR", "EOD", "EOW",
    "RFC", "MR", "MRS", "LGBTQ", "LGBT", "OOO", "WIP", "NDA", "FTE", "ROI", "B2B", "SAAS", "GDPR",
    "TBA", "IIRC", "AFAIK", "BTW", "OMG", "AKA", "DIY", "PTO", "QPS", "RPS",
];

/// Family words written with a capital that name a relation, not an entity ("Mom called").
#[rustfmt::skip]
const FAMILY_WORDS: &[&str] = &[
    "mom", "mum", "dad", "mommy", "daddy", "grandma", "grandpa", "granny", "nana", "papa", "mama",
    "auntie", "uncle", "aunt", "sis", "bro",
];

/// Well-known software, languages, services and devices: named as products whatever
/// the words around them say (general knowledge of agent traffic, not of one dataset).
#[rustfmt::skip]
const KNOWN_PRODUCTS: &[&str] = &[
    "android", "ansible", "bazel", "chrome", "chromium", "clickhouse", "docker", "duckdb",
    "elasticsearch", "excel", "figma", "firefox", "flutter", "git", "go", "golang", "grafana",
    "helm", "ios", "java", "javascript", "jenkins", "jira", "kafka", "kotlin", "kubernetes",
    "linux", "macos", "mongodb", "mysql", "neovim", "nginx", "node", "node.js", "notion",
    "postgres", "postgresql", "prometheus", "python", "rabbitmq", "react", "redis", "rust",
    "safari", "slack", "sqlite", "swift", "terraform", "traefik", "typescript", "ubuntu", "vim",
    "vault", "vscode", "windows", "zoom", "qdrant", "neo4j", "falkordb", "cargo", "npm", "pnpm",
    "yarn", "webpack", "vite", "django", "flask", "rails", "spring", "pytorch", "tensorflow",
    "numpy", "pandas", "airflow", "spark", "hadoop", "snowflake", "bigquery", "iphone", "ipad",
    "kindle", "playwright", "loki", "jaeger", "tempo", "consul", "nomad", "envoy", "istio",
    "linkerd", "buildkite", "circleci", "dependabot", "renovate", "sentry", "datadog", "pagerduty",
    "confluence", "trello", "asana", "linear", "outlook", "gmail",
];

/// Well-known companies and institutions.
#[rustfmt::skip]
const KNOWN_ORGANIZATIONS: &[&str] = &[
    "amazon", "apple", "google", "microsoft", "meta", "facebook", "netflix", "openai", "anthropic",
    "ibm", "intel", "nvidia", "oracle", "salesforce", "stripe", "twilio", "github", "gitlab",
    "atlassian", "cloudflare", "hetzner", "digitalocean", "spotify", "uber", "airbnb", "tesla",
    "samsung", "sony", "adobe", "okta", "auth0", "aws", "gcp", "azure", "mozilla", "nasa",
    "unicef", "who", "un", "eu",
];

/// Words of a repository's layout that start a relative path ("src/…", "packages/ui").
#[rustfmt::skip]
const PATH_ROOTS: &[&str] = &[
    "src", "lib", "libs", "test", "tests", "docs", "doc", "packages", "clients", "apps", "app",
    "config", "configs", "scripts", "feature", "features", "fix", "bugfix", "hotfix", "release",
    "bin", "cmd", "internal", "pkg", "crates", "migrations", "assets", "public", "static",
    "deploy", "infra", "charts", "examples", "bench", "tools", "vendor", "build", "dist",
];

/// Honorifics left out of a person's name ("Dr Smith" → "Smith", a person).
const HONORIFICS: &[&str] = &["mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam"];

/// Small words allowed inside a multi-word name ("Bank of America", "Ludwig van Beethoven").
#[rustfmt::skip]
const NAME_CONNECTORS: &[&str] = &[
    "of", "de", "van", "von", "der", "den", "la", "le", "du", "da", "&",
];

/// Last words of organisation names.
#[rustfmt::skip]
const ORG_SUFFIXES: &[&str] = &[
    "inc", "corp", "corporation", "ltd", "llc", "gmbh", "ag", "plc", "co", "company", "labs",
    "lab", "foundation", "university", "college", "school", "institute", "bank", "group", "team",
    "club", "agency", "council", "department", "ministry", "hospital", "studio", "studios",
    "systems", "technologies", "software", "partners", "association", "society", "academy",
    "church", "center", "centre", "library", "museum", "committee", "union",
];

/// Last words of place names.
#[rustfmt::skip]
const PLACE_SUFFIXES: &[&str] = &[
    "city", "street", "st", "avenue", "ave", "road", "rd", "park", "lake", "river", "mountain",
    "mountains", "beach", "island", "islands", "county", "state", "valley", "bay", "square",
    "airport", "station", "bridge", "coast", "falls", "canyon", "forest", "village", "town",
];

/// Words before a place ("lives in Paris", "moved to Lisbon", "a trip to Japan").
#[rustfmt::skip]
const PLACE_CUES: &[&[&str]] = &[
    &["live", "in"], &["lives", "in"], &["lived", "in"], &["living", "in"], &["based", "in"],
    &["born", "in"], &["located", "in"], &["stay", "in"], &["stayed", "in"], &["moved", "to"],
    &["move", "to"], &["moving", "to"], &["trip", "to"], &["flew", "to"], &["fly", "to"],
    &["travel", "to"], &["traveled", "to"], &["travelled", "to"], &["went", "to"], &["visited"],
    &["visit"], &["visiting"], &["from"], &["near"], &["region"],
];

/// Words before an organisation ("works at Acme", "joined Globex").
#[rustfmt::skip]
const ORG_CUES: &[&[&str]] = &[
    &["work", "at"], &["works", "at"], &["worked", "at"], &["working", "at"], &["work", "for"],
    &["works", "for"], &["worked", "for"], &["working", "for"], &["joined"], &["join"],
    &["hired", "by"], &["employed", "by"], &["intern", "at"], &["interned", "at"],
    &["studies", "at"], &["studied", "at"], &["study", "at"], &["graduated", "from"],
    &["customer"], &["client"], &["vendor"],
];

/// Words before a product ("using Postgres", "bought a Kindle").
#[rustfmt::skip]
const PRODUCT_CUES: &[&[&str]] = &[
    &["use"], &["uses"], &["using"], &["used"], &["installed"], &["install"], &["upgrade", "to"],
    &["upgraded", "to"], &["switched", "to"], &["switch", "to"], &["migrate", "to"],
    &["migrated", "to"], &["runs", "on"], &["run", "on"], &["running", "on"], &["built", "with"],
    &["written", "in"], &["bought", "a"], &["bought", "an"], &["bought"], &["my", "new"],
    &["deployed", "on"], &["deploy", "to"], &["deployed", "to"], &["hosted", "on"],
];

/// A person's verbs right after a name ("Melanie went", "Bob said").
#[rustfmt::skip]
const PERSON_VERBS: &[&str] = &[
    "said", "says", "told", "tells", "asked", "asks", "went", "goes", "thinks", "thought", "loves",
    "loved", "likes", "liked", "wants", "wanted", "works", "worked", "lives", "lived", "met",
    "joined", "called", "wrote", "mentioned", "replied", "agreed", "decided", "prefers",
    "preferred", "manages", "managed", "leads", "led", "studies", "studied", "visited", "moved",
    "bought", "feels", "felt", "knows", "knew", "plays", "played", "paints", "painted", "enjoys",
    "enjoyed", "started", "finished", "sent", "reviewed", "approved", "suggested", "recommended",
    "owns", "runs", "took", "gave", "got", "made", "came", "left", "is", "was", "has", "had",
    "will", "would", "can", "and", "cooks", "cooked", "ran", "swims", "reads", "writes", "teaches",
    "taught", "attends", "attended", "adopted", "married",
];

/// Words before a person ("my sister Ana", "with Bob", "thanks, Carol").
#[rustfmt::skip]
const PERSON_CUES: &[&[&str]] = &[
    &["my", "friend"], &["my", "sister"], &["my", "brother"], &["my", "mom"], &["my", "dad"],
    &["my", "wife"], &["my", "husband"], &["my", "partner"], &["my", "son"], &["my", "daughter"],
    &["my", "boss"], &["my", "manager"], &["my", "colleague"], &["my", "coworker"],
    &["my", "cousin"], &["my", "neighbor"], &["my", "neighbour"], &["my", "kid"], &["my", "aunt"],
    &["my", "uncle"], &["my", "grandma"], &["my", "grandpa"], &["thanks"], &["thank", "you"],
    &["hi"], &["hey"], &["hello"], &["ask"], &["asked"], &["tell"], &["told"], &["ping"],
    &["pinged"], &["cc"], &["met"], &["meet"], &["meeting", "with"], &["call", "with"],
    &["talked", "to"], &["talk", "to"], &["spoke", "to"], &["spoke", "with"], &["according", "to"],
    &["assigned", "to"], &["reviewed", "by"], &["written", "by"], &["approved", "by"], &["named"],
    &["called"],
];

fn lower(word: &str) -> String {
    word.to_lowercase().replace('\u{2019}', "'")
}

/// A word of a name: starts with an upper-case letter, letters (and ' - .) after.
fn is_capitalised(word: &str) -> bool {
    let mut chars = word.chars();
    let first = chars.next();
    let camel = first.is_some_and(char::is_lowercase)
        && word.chars().skip(1).any(char::is_uppercase)
        && word.chars().all(char::is_alphanumeric)
        && word.len() >= 3;
    // A ticket id ("JIRA-4512") or a quarter ("Q3") names no entity.
    let ticket = word.contains('-')
        && word
            .rsplit('-')
            .next()
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    let quarter = word.len() == 2
        && word.starts_with('Q')
        && word[1..].chars().all(|c| ('1'..='4').contains(&c));
    if ticket || quarter {
        return false;
    }
    (first.is_some_and(char::is_uppercase) || camel)
        && word.chars().any(char::is_alphabetic)
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '\'' | '-' | '.' | '\u{2019}' | '&'))
}

/// The word without a possessive ("Melanie's" → "Melanie").
fn without_possessive(word: &str) -> (&str, bool) {
    for suffix in ["'s", "\u{2019}s", "s'", "s\u{2019}"] {
        if let Some(stem) = word.strip_suffix(suffix) {
            if suffix.starts_with('s') {
                return (&word[..stem.len() + 1], true);
            }
            return (stem, true);
        }
    }
    (word, false)
}

fn is_url(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("www."))
        && word.len() > 8
}

fn is_email(word: &str) -> bool {
    let Some((local, domain)) = word.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && local
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '%' | '+' | '-'))
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '-'))
        && domain
            .rsplit('.')
            .next()
            .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(char::is_alphabetic))
}

fn is_handle(word: &str) -> bool {
    word.strip_prefix('@').is_some_and(|name| {
        name.len() >= 2
            && name.len() <= 39
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && name.chars().next().is_some_and(char::is_alphanumeric)
    })
}

fn is_version(word: &str) -> bool {
    let body = word
        .strip_prefix('v')
        .or_else(|| word.strip_prefix('V'))
        .filter(|rest| rest.chars().next().is_some_and(|c| c.is_ascii_digit()));
    let prefixed = body.is_some();
    let body = body.unwrap_or(word);
    let (numbers, _suffix) = match body.split_once(['-', '+']) {
        Some((n, s)) => (n, Some(s)),
        None => (body, None),
    };
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.len() <= 6 && p.chars().all(|c| c.is_ascii_digit()));
    numeric && (parts.len() >= 3 || (prefixed && !parts.is_empty()))
}

fn is_path(word: &str) -> bool {
    if is_url(word) || word.contains("://") || word.len() < 3 {
        return false;
    }
    let has_letter = word.chars().any(char::is_alphabetic);
    let plain = word.chars().all(|c| {
        c.is_alphanumeric() || matches!(c, '/' | '\\' | '.' | '_' | '-' | '~' | '*' | '@' | ':')
    });
    if !has_letter || !plain {
        return false;
    }
    let slashed = word.contains('/') || word.contains('\\');
    if slashed {
        // Not a fraction or a date ("1/2", "5/8/2023"), not "and/or".
        let segments: Vec<&str> = word.split(['/', '\\']).filter(|s| !s.is_empty()).collect();
        let rooted = word.starts_with('/')
            || word.starts_with("~/")
            || word.starts_with("./")
            || word.starts_with("../");
        let has_file = segments
            .last()
            .and_then(|s| s.rsplit_once('.'))
            .is_some_and(|(stem, ext)| {
                !stem.is_empty() && FILE_EXTENSIONS.contains(&lower(ext).as_str())
            });
        let layout = segments.len() >= 2
            && PATH_ROOTS.contains(&segments[0])
            && segments.iter().all(|s| {
                s.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.')
                })
            });
        return (rooted && segments.iter().any(|s| s.chars().any(char::is_alphabetic)))
            || layout
            || has_file
            || (segments.len() >= 3
                && segments.iter().all(|s| {
                    s.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.')
                    })
                }));
    }
    match word.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && stem.chars().any(char::is_alphabetic)
                && !stem.contains('.')
                && FILE_EXTENSIONS.contains(&lower(ext).as_str())
                && !(ext.chars().all(|c| c.is_ascii_uppercase())
                    && ext.len() > 1
                    && stem.chars().next().is_some_and(char::is_uppercase)
                    && stem.len() < 2)
        }
        None => false,
    }
}

/// True when `word` (lower case) is a day of the month ("8", "8th", "21st").
fn is_day(word: &str) -> bool {
    let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
    let rest = &word[digits.len()..];
    !digits.is_empty()
        && digits.len() <= 2
        && digits.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d))
        && matches!(rest, "" | "st" | "nd" | "rd" | "th")
}

fn is_year(word: &str) -> bool {
    word.len() == 4
        && word.chars().all(|c| c.is_ascii_digit())
        && word
            .parse::<u32>()
            .is_ok_and(|y| (1900..=2100).contains(&y))
}

fn is_iso_date(word: &str) -> bool {
    let parts: Vec<&str> = word.split('-').collect();
    parts.len() == 3
        && is_year(parts[0])
        && parts[1].len() == 2
        && parts[2].len() == 2
        && parts[1..]
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_digit()))
}

/// Tokens of the text with their cleaned words, lower-cased words and sentence starts.
struct Words<'a> {
    /// (clean word, start, end) per token.
    clean: Vec<(&'a str, usize, usize)>,
    /// Lower case of each clean word.
    lower: Vec<String>,
    /// Whether a token starts a sentence (or a line, or the text).
    sentence_start: Vec<bool>,
    /// Whether a token ends a sentence or clause (. ! ? : ; , after it).
    ends_clause: Vec<bool>,
    /// Whether a token opens or closes brackets: a name never runs across one
    /// ("Melanie (Mel)" is two names).
    bracket: Vec<(bool, bool)>,
}

fn words(text: &str) -> Words<'_> {
    let raw = tokens(text);
    let clean: Vec<(&str, usize, usize)> = raw.iter().map(|t| core(*t)).collect();
    let lowered: Vec<String> = clean.iter().map(|(w, _, _)| lower(w)).collect();
    let mut sentence_start = Vec::with_capacity(raw.len());
    let mut ends_clause = Vec::with_capacity(raw.len());
    let bracket = raw
        .iter()
        .map(|t| {
            (
                t.raw.starts_with(['(', '[']),
                t.raw
                    .trim_end_matches(['.', ',', ';', ':', '!', '?'])
                    .ends_with([')', ']']),
            )
        })
        .collect();
    for (i, token) in raw.iter().enumerate() {
        let after_break = i == 0 || {
            let previous = raw[i - 1];
            let between = &text[previous.start + previous.raw.len()..token.start];
            let abbreviation = {
                let word = lower(previous.raw.trim_end_matches('.'));
                HONORIFICS.contains(&word.as_str())
                    || matches!(
                        word.as_str(),
                        "st" | "e.g" | "i.e" | "vs" | "etc" | "approx" | "no" | "ft" | "mt"
                    )
            };
            between.contains('\n')
                || !abbreviation
                    && previous
                        .raw
                        .trim_end_matches(['"', '\'', ')', '\u{201d}', '\u{2019}', '*'])
                        .ends_with(['.', '!', '?', ':'])
        };
        let bullet = token.raw.starts_with(['-', '*', '•', '"', '\u{201c}', '('])
            && token.raw.len() > 1
            && core(*token)
                .0
                .chars()
                .next()
                .is_some_and(char::is_uppercase)
            && i > 0
            && sentence_start.last().copied().unwrap_or(false);
        sentence_start.push(after_break || bullet);
        ends_clause.push(
            token
                .raw
                .trim_end_matches(['"', '\'', ')', '\u{201d}', '\u{2019}'])
                .ends_with(['.', '!', '?', ':', ';', ',']),
        );
    }
    Words {
        clean,
        lower: lowered,
        sentence_start,
        ends_clause,
        bracket,
    }
}

/// True when the words before `at` (lower case) end with one of `cues`.
fn preceded_by(lower: &[String], at: usize, cues: &[&[&str]]) -> bool {
    cues.iter().any(|cue| {
        // Allow one article between the cue and the name ("moved to the Netherlands").
        let matches_at = |end: usize| {
            end >= cue.len()
                && lower[end - cue.len()..end]
                    .iter()
                    .zip(cue.iter())
                    .all(|(w, c)| w == c)
        };
        matches_at(at)
            || (at >= 1
                && matches!(lower[at - 1].as_str(), "the" | "a" | "an")
                && matches_at(at - 1))
    })
}

/// The keys a question may name an entity by: its words and runs of two or three
/// words, lower case, without runs that are only stop words and without the
/// `excluded` keys (speakers). Which of them are entities the index decides.
pub fn question_keys(question: &str, excluded: &HashSet<String>) -> Vec<String> {
    let words: Vec<String> = question
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '-' | '.' | '@' | '_')))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .map(|w| w.strip_suffix("'s").unwrap_or(w).to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    let mut keys = Vec::new();
    for n in 1..=3 {
        for run in words.windows(n) {
            if run.iter().all(|w| is_stopword(w)) {
                continue;
            }
            let key = run.join(" ");
            if !excluded.contains(&key) && !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// The mentions of `text`. `known` holds keys of names the agent already knows (a
/// sentence-initial word matching one is a name).
#[allow(clippy::needless_range_loop)] // walks parallel per-token arrays by index
pub fn extract(text: &str, known: &HashSet<String>) -> Vec<EntityMention> {
    let words = words(text);
    let n = words.clean.len();
    let mut taken = vec![false; n];
    let mut out: Vec<EntityMention> = Vec::new();
    let push = |out: &mut Vec<EntityMention>,
                surface: &str,
                start: usize,
                end: usize,
                kind: EntityKind| {
        let key = entity_key(surface);
        if key.is_empty() {
            return;
        }
        out.push(EntityMention {
            surface: surface.to_string(),
            key,
            kind,
            start,
            end,
        });
    };

    // A transcript label at a line's start: a speaker, so a person.
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if let Some(label) = crate::policy::fusion::speaker_label(line) {
            let offset = line.find(label).unwrap_or(0);
            let first_word = label.split_whitespace().next().unwrap_or_default();
            let generic = matches!(
                lower(first_word).as_str(),
                "user"
                    | "assistant"
                    | "system"
                    | "note"
                    | "todo"
                    | "q"
                    | "a"
                    | "re"
                    | "subject"
                    | "update"
                    | "warning"
                    | "error"
                    | "info"
                    | "tip"
                    | "step"
                    | "fix"
                    | "done"
                    | "status"
                    | "summary"
                    | "decision"
                    | "action"
                    | "question"
                    | "answer"
                    | "ps"
            ) || COMMON_CAPITALISED.contains(&lower(first_word).as_str());
            if !generic && label.chars().next().is_some_and(char::is_uppercase) {
                let start = line_start + offset;
                push(
                    &mut out,
                    label,
                    start,
                    start + label.len(),
                    EntityKind::Person,
                );
                for (i, (_, s, e)) in words.clean.iter().enumerate() {
                    if *s >= start && *e <= start + label.len() + 1 {
                        taken[i] = true;
                    }
                }
            }
        }
        line_start += line.len();
    }

    // Structured tokens: URLs, emails, handles, paths, versions, ISO dates.
    for i in 0..n {
        if taken[i] {
            continue;
        }
        let (word, start, end) = words.clean[i];
        let kind = if is_url(word) {
            Some(EntityKind::Url)
        } else if is_email(word) {
            Some(EntityKind::Email)
        } else if is_handle(word) {
            Some(EntityKind::Handle)
        } else if is_iso_date(word) {
            Some(EntityKind::Date)
        } else if is_version(word) {
            Some(EntityKind::Version)
        } else if is_path(word) {
            Some(EntityKind::Path)
        } else {
            None
        };
        if let Some(kind) = kind {
            let surface = if kind == EntityKind::Url {
                word.trim_end_matches('/')
            } else {
                word
            };
            push(&mut out, surface, start, start + surface.len(), kind);
            taken[i] = true;
        }
        let _ = end;
    }

    // Dates with a month name: "8 May 2023", "May 8, 2023", "May 2023", "8 May".
    for i in 0..n {
        if taken[i] || !MONTHS.contains(&words.lower[i].trim_end_matches('.')) {
            continue;
        }
        // A bare "may" or "march" is a verb more often than a month.
        let month_word = words.clean[i].0;
        if !month_word.chars().next().is_some_and(char::is_uppercase) {
            continue;
        }
        let mut first = i;
        let mut last = i;
        if i >= 1 && !taken[i - 1] && is_day(&words.lower[i - 1]) {
            first = i - 1;
        }
        if i + 1 < n && !taken[i + 1] && is_day(&words.lower[i + 1]) && first == i {
            last = i + 1;
        }
        if last + 1 < n && !taken[last + 1] && is_year(&words.lower[last + 1]) {
            last += 1;
        }
        let alone = first == i && last == i;
        if alone
            && matches!(
                words.lower[i].as_str(),
                "may"
                    | "march"
                    | "mar"
                    | "jan"
                    | "dec"
                    | "sep"
                    | "oct"
                    | "nov"
                    | "aug"
                    | "jun"
                    | "jul"
                    | "apr"
                    | "feb"
            )
        {
            // "May I …", "March on": only with a day or a year is it surely a date.
            if !(i >= 1
                && matches!(
                    words.lower[i - 1].as_str(),
                    "in" | "since"
                        | "until"
                        | "of"
                        | "early"
                        | "late"
                        | "mid"
                        | "last"
                        | "next"
                        | "this"
                ))
            {
                continue;
            }
        }
        let (start, end) = (words.clean[first].1, words.clean[last].2);
        push(&mut out, &text[start..end], start, end, EntityKind::Date);
        for slot in taken.iter_mut().take(last + 1).skip(first) {
            *slot = true;
        }
    }

    // Quoted titles: "…" or “…” of 1–10 words with a capital.
    for (open, close) in [('"', '"'), ('\u{201c}', '\u{201d}')] {
        let mut search = 0;
        while let Some(found) = text[search..].find(open) {
            let from = search + found + open.len_utf8();
            let Some(length) = text[from..].find(close) else {
                break;
            };
            let inner = &text[from..from + length];
            let inner_words: Vec<&str> = inner.split_whitespace().collect();
            let titled = !inner_words.is_empty()
                && inner_words.len() <= 10
                && inner_words[0]
                    .chars()
                    .next()
                    .is_some_and(char::is_uppercase)
                && !inner.contains(['\n'])
                && !inner.trim_end().ends_with(['.', '?', '!', ','])
                && inner_words
                    .iter()
                    .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
                    .count()
                    * 2
                    >= inner_words.len();
            if titled {
                let trimmed = inner.trim();
                let start = from + (inner.len() - inner.trim_start().len());
                push(
                    &mut out,
                    trimmed,
                    start,
                    start + trimmed.len(),
                    EntityKind::Title,
                );
                for (i, (_, s, e)) in words.clean.iter().enumerate() {
                    if *s >= start && *e <= start + trimmed.len() {
                        taken[i] = true;
                    }
                }
            }
            search = from + length + close.len_utf8();
        }
    }

    // Names: runs of capitalised words (with connectors inside), honorifics left out.
    let mut i = 0;
    while i < n {
        if taken[i] || !is_capitalised(words.clean[i].0) {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut possessive = false;
        let mut last_name = i;
        while j < n && !taken[j] {
            let (word, _, _) = words.clean[j];
            // Brackets end a name: "Melanie (Mel)", "(Acme) Corp".
            if j > i && (words.bracket[j].0 || words.bracket[j - 1].1) {
                break;
            }
            if is_capitalised(word) {
                let (_, has_possessive) = without_possessive(word);
                last_name = j;
                j += 1;
                if has_possessive {
                    possessive = true;
                    break;
                }
                let abbreviation = HONORIFICS.contains(&words.lower[j - 1].trim_end_matches('.'))
                    || words.lower[j - 1] == "st.";
                if words.ends_clause[j - 1] && !abbreviation {
                    break;
                }
            } else if NAME_CONNECTORS.contains(&words.lower[j].as_str())
                && j + 1 < n
                && is_capitalised(words.clean[j + 1].0)
                && j > i
            {
                j += 1;
            } else {
                break;
            }
        }
        let mut first = i;
        let end_index = last_name;
        // Leading words that only start the sentence ("Yesterday Alice …", "The Tate").
        let mut honorific = false;
        while first <= end_index {
            let word = words.lower[first].trim_end_matches('.').to_string();
            if HONORIFICS.contains(&word.as_str()) && first < end_index {
                honorific = true;
                first += 1;
                continue;
            }
            let common = COMMON_CAPITALISED.contains(&word.as_str())
                || is_stopword(&word)
                || WEEKDAYS.contains(&word.as_str())
                || MONTHS.contains(&word.as_str());
            if common && words.sentence_start[first] && first < end_index
                || (common && first == end_index)
            {
                first += 1;
                continue;
            }
            break;
        }
        if first > end_index {
            // Only common words: a weekday on its own is a date.
            for k in i..=end_index {
                if WEEKDAYS.contains(&words.lower[k].as_str()) && !words.sentence_start[k] {
                    let (w, s, e) = words.clean[k];
                    push(&mut out, w, s, e, EntityKind::Date);
                    taken[k] = true;
                }
            }
            i = j.max(i + 1);
            continue;
        }
        let start = words.clean[first].1;
        let (last_word, last_start, _) = words.clean[end_index];
        let (last_clean, _) = without_possessive(last_word);
        let end = last_start + last_clean.len();
        let surface = &text[start..end];
        let single = first == end_index;
        let key = entity_key(surface);
        let first_lower = words.lower[first].as_str();
        let acronym = single
            && surface.len() >= 2
            && surface
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && surface.chars().any(|c| c.is_ascii_uppercase());
        if acronym && GENERIC_ACRONYMS.contains(&surface) {
            i = j.max(i + 1);
            continue;
        }
        let next_lower = words.lower.get(end_index + 1).map(String::as_str);
        let person_verb_after =
            next_lower.is_some_and(|w| PERSON_VERBS.contains(&w)) && !words.ends_clause[end_index];
        let elsewhere_capitalised = (0..n).any(|k| {
            (k < first || k > end_index)
                && !words.sentence_start[k]
                && words.lower[k].trim_end_matches("'s") == first_lower.trim_end_matches("'s")
                && is_capitalised(words.clean[k].0)
        });
        let initial = words.sentence_start[first];
        let common_first = COMMON_CAPITALISED.contains(&first_lower)
            || is_stopword(first_lower)
            || FAMILY_WORDS.contains(&first_lower);
        // "Omar grew up …", "Caroline researched …": a past-tense verb after it.
        let past_verb_after = next_lower.is_some_and(|w| {
            (w.ends_with("ed") && w.len() > 3)
                || matches!(
                    w,
                    "grew"
                        | "lost"
                        | "went"
                        | "got"
                        | "made"
                        | "took"
                        | "gave"
                        | "came"
                        | "ran"
                        | "won"
                        | "wrote"
                        | "began"
                        | "built"
                        | "bought"
                        | "brought"
                        | "caught"
                        | "drove"
                        | "found"
                        | "felt"
                        | "flew"
                        | "heard"
                        | "kept"
                        | "knew"
                        | "left"
                        | "led"
                        | "met"
                        | "paid"
                        | "read"
                        | "said"
                        | "sent"
                        | "sold"
                        | "spent"
                        | "spoke"
                        | "taught"
                        | "thought"
                        | "told"
                        | "won't"
                        | "saw"
                        | "sang"
                        | "swam"
                )
        }) && !words.ends_clause[end_index];
        // "Maria, how was …": a name called by its owner.
        let vocative = text[words.clean[end_index].2..].starts_with(',');
        let from_after = next_lower == Some("from") && !words.ends_clause[end_index];
        let accept = !initial
            || !single
            || possessive
            || honorific
            || known.contains(&key)
            || elsewhere_capitalised
            || acronym
            || KNOWN_PRODUCTS.contains(&key.as_str())
            || KNOWN_ORGANIZATIONS.contains(&key.as_str())
            || (!common_first && (person_verb_after || past_verb_after || vocative || from_after));
        if !accept || first_lower == "i" || (single && FAMILY_WORDS.contains(&first_lower)) {
            i = j.max(i + 1);
            continue;
        }
        let last_lower = words.lower[end_index].trim_end_matches('.').to_string();
        let version_after = next_lower.is_some_and(|w| {
            is_version(w)
                || (w.chars().next().is_some_and(|c| c.is_ascii_digit())
                    && w.len() <= 6
                    && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        });
        let inner_capital = surface.chars().skip(1).any(char::is_uppercase) && single && !acronym;
        let lower_start = surface.chars().next().is_some_and(char::is_lowercase);
        let kind = if KNOWN_PRODUCTS.contains(&key.as_str())
            || (!single && KNOWN_PRODUCTS.contains(&first_lower))
        {
            EntityKind::Product
        } else if KNOWN_ORGANIZATIONS.contains(&key.as_str()) {
            EntityKind::Organization
        } else if acronym {
            if preceded_by(&words.lower, first, PRODUCT_CUES) {
                EntityKind::Product
            } else {
                EntityKind::Organization
            }
        } else if honorific || preceded_by(&words.lower, first, PERSON_CUES) {
            EntityKind::Person
        } else if !single
            && words.lower[first..=end_index].iter().any(|w| {
                ORG_SUFFIXES.contains(&w.trim_end_matches(['.', ',']).trim_end_matches("'s"))
            })
        {
            EntityKind::Organization
        } else if !single && PLACE_SUFFIXES.contains(&last_lower.as_str()) {
            EntityKind::Place
        } else if preceded_by(&words.lower, first, ORG_CUES) {
            EntityKind::Organization
        } else if preceded_by(&words.lower, first, PLACE_CUES) {
            EntityKind::Place
        } else if version_after
            || inner_capital
            || lower_start
            || preceded_by(&words.lower, first, PRODUCT_CUES)
        {
            EntityKind::Product
        } else if person_verb_after
            || possessive
            || (initial && single && (past_verb_after || from_after || vocative))
        {
            EntityKind::Person
        } else {
            EntityKind::Name
        };
        push(&mut out, surface, start, end, kind);
        for slot in taken.iter_mut().take(end_index + 1).skip(first) {
            *slot = true;
        }
        i = j.max(i + 1);
    }
    out.sort_by_key(|m| (m.start, m.end));
    out
}

#[cfg(test)]
mod question_tests {
    use super::*;

    #[test]
    fn a_name_never_runs_across_brackets() {
        let found: Vec<String> = extract(
            "I met Melanie (Mel) and (Acme) Corp staff.",
            &HashSet::new(),
        )
        .into_iter()
        .map(|m| m.surface)
        .collect();
        assert_eq!(found, ["Melanie", "Mel", "Acme", "Corp"], "{found:?}");
    }

    #[test]
    fn question_keys_are_words_and_short_runs_without_speakers() {
        let speakers: HashSet<String> = ["melanie".to_string()].into();
        let keys = question_keys("What did Melanie's friend from New York bring?", &speakers);
        assert!(keys.contains(&"new york".to_string()), "{keys:?}");
        assert!(keys.contains(&"friend".to_string()));
        assert!(!keys.contains(&"melanie".to_string()));
        assert!(!keys.iter().any(|k| k == "what" || k == "what did"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, &'static str)> {
        extract(text, &HashSet::new())
            .into_iter()
            .map(|m| (m.surface, m.kind.as_str()))
            .collect()
    }

    fn pairs(expected: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        expected.iter().map(|(s, k)| (s.to_string(), *k)).collect()
    }

    #[test]
    fn sentence_initial_capitals_are_not_names_unless_something_says_so() {
        assert_eq!(found("Yesterday we shipped the release."), pairs(&[]));
        assert_eq!(found("Thanks, that works."), pairs(&[]));
        assert_eq!(found("Deploy the service first."), pairs(&[]));
        assert_eq!(
            found("Melanie went to the park."),
            pairs(&[("Melanie", "person")])
        );
        assert_eq!(
            found("Melanie's kids love the beach."),
            pairs(&[("Melanie", "person")])
        );
        assert_eq!(
            found("Caroline: I talked to Melanie about Caroline's plans."),
            pairs(&[
                ("Caroline", "person"),
                ("Melanie", "person"),
                ("Caroline", "person")
            ])
        );
        let known: HashSet<String> = ["jon".to_string()].into();
        let mentions = extract("Jon agreed.", &known);
        assert_eq!(mentions[0].key, "jon");
    }

    #[test]
    fn possessives_and_honorifics_are_left_out_of_the_name() {
        let mentions = extract("We met Dr. Ana Souza's team at Acme Labs.", &HashSet::new());
        let names: Vec<(&str, EntityKind)> = mentions
            .iter()
            .map(|m| (m.surface.as_str(), m.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("Ana Souza", EntityKind::Person),
                ("Acme Labs", EntityKind::Organization)
            ]
        );
        assert_eq!(mentions[0].key, "ana souza");
    }

    #[test]
    fn nested_and_multi_word_names_stay_whole() {
        assert_eq!(
            found("She works at Bank of America in New York City."),
            pairs(&[
                ("Bank of America", "organization"),
                ("New York City", "place")
            ])
        );
        assert_eq!(
            found("We visited the University of Toronto campus."),
            pairs(&[("University of Toronto", "organization")])
        );
    }

    #[test]
    fn structured_tokens_are_recognised() {
        assert_eq!(
            found("Mail ops@example.com or ping @dana_k, see https://example.com/runbook."),
            pairs(&[
                ("ops@example.com", "email"),
                ("@dana_k", "handle"),
                ("https://example.com/runbook", "url")
            ])
        );
        assert_eq!(
            found("Bump serde to v1.0.228 in Cargo.toml and src/main.rs before 2024-03-01."),
            pairs(&[
                ("v1.0.228", "version"),
                ("Cargo.toml", "path"),
                ("src/main.rs", "path"),
                ("2024-03-01", "date")
            ])
        );
        assert_eq!(
            found("Edit /etc/nginx/nginx.conf on the box."),
            pairs(&[("/etc/nginx/nginx.conf", "path")])
        );
    }

    #[test]
    fn dates_need_a_month_with_a_day_or_a_year() {
        assert_eq!(
            found("The launch is on 8 May 2023."),
            pairs(&[("8 May 2023", "date")])
        );
        assert_eq!(
            found("We met on March 3, 2024."),
            pairs(&[("March 3, 2024", "date")])
        );
        assert_eq!(found("May I ask a question?"), pairs(&[]));
        assert_eq!(
            found("We deploy on Tuesdays."),
            pairs(&[("Tuesdays", "date")])
        );
    }

    #[test]
    fn kinds_come_from_the_words_around_a_name() {
        assert_eq!(
            found("Alice lives in Lisbon."),
            pairs(&[("Alice", "person"), ("Lisbon", "place")])
        );
        assert_eq!(
            found("Our API runs on PostgreSQL 15."),
            pairs(&[("PostgreSQL", "product")])
        );
        assert_eq!(
            found("I switched to Neovim last week."),
            pairs(&[("Neovim", "product")])
        );
        assert_eq!(
            found("Bob joined Globex in March 2024."),
            pairs(&[
                ("Bob", "person"),
                ("Globex", "organization"),
                ("March 2024", "date")
            ])
        );
        assert_eq!(found("My sister Ana called."), pairs(&[("Ana", "person")]));
    }

    #[test]
    fn quoted_titles_are_titles() {
        assert_eq!(
            found("She recommended \"Becoming Nicole\" to me."),
            pairs(&[("Becoming Nicole", "title")])
        );
        assert_eq!(found("He said \"sure, fine\" and left."), pairs(&[]));
    }

    #[test]
    fn generic_abbreviations_and_i_are_not_entities() {
        assert_eq!(found("The API and the DB are down, I think."), pairs(&[]));
        assert_eq!(
            found("We moved from AWS to GCP."),
            pairs(&[("AWS", "organization"), ("GCP", "organization")])
        );
    }

    #[test]
    fn spans_point_into_the_text() {
        let text = "Ping @sam about Melanie's talk at PyCon.";
        for mention in extract(text, &HashSet::new()) {
            assert_eq!(&text[mention.start..mention.end], mention.surface);
        }
    }
}

/// Precision and recall of [`extract`] on a labelled sample.
#[cfg(test)]
mod sample {
    use super::*;

    /// The labelled sample: varied agent traffic (code, ops, chat), written by hand;
    /// the rules were refined while reading its misses.
    const SAMPLE: &str = include_str!("entities_sample.jsonl");

    /// A second sample written after the rules were settled and measured once: the
    /// figure to trust.
    const HELD_OUT: &str = include_str!("entities_heldout.jsonl");

    /// Counts of one comparison.
    #[derive(Default, Debug)]
    struct Counts {
        /// Predicted and labelled.
        hits: usize,
        /// Predicted.
        predicted: usize,
        /// Labelled.
        labelled: usize,
    }

    impl Counts {
        fn precision(&self) -> f64 {
            self.hits as f64 / self.predicted.max(1) as f64
        }
        fn recall(&self) -> f64 {
            self.hits as f64 / self.labelled.max(1) as f64
        }
    }

    /// (mentions, with kinds) over the sample; prints the misses.
    fn measure(sample: &str) -> (Counts, Counts, usize) {
        let (mut keys, mut kinds) = (Counts::default(), Counts::default());
        let mut sentences = 0;
        for line in sample.lines().filter(|l| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let text = row["text"].as_str().unwrap();
            sentences += 1;
            let gold: Vec<(String, String)> = row["entities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        entity_key(e[0].as_str().unwrap()),
                        e[1].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            let got: Vec<(String, String)> = extract(text, &HashSet::new())
                .into_iter()
                .map(|m| (m.key, m.kind.as_str().to_string()))
                .collect();
            let mut unmatched: Vec<&(String, String)> = gold.iter().collect();
            let mut unmatched_kind: Vec<&(String, String)> = gold.iter().collect();
            for found in &got {
                if let Some(at) = unmatched.iter().position(|g| g.0 == found.0) {
                    unmatched.remove(at);
                    keys.hits += 1;
                } else {
                    println!("extra   {:?} in {text:?}", found);
                }
                if let Some(at) = unmatched_kind.iter().position(|g| **g == *found) {
                    unmatched_kind.remove(at);
                    kinds.hits += 1;
                }
            }
            for missed in unmatched {
                println!("missed  {missed:?} in {text:?}");
            }
            keys.predicted += got.len();
            keys.labelled += gold.len();
            kinds.predicted += got.len();
            kinds.labelled += gold.len();
        }
        (keys, kinds, sentences)
    }

    fn report(name: &str, sample: &str) -> (Counts, Counts, usize) {
        let (keys, kinds, sentences) = measure(sample);
        println!(
            "entity extraction, {name}: {sentences} sentences, {} labelled mentions: \
             mentions P {:.3} R {:.3}; with the kind P {:.3} R {:.3}",
            keys.labelled,
            keys.precision(),
            keys.recall(),
            kinds.precision(),
            kinds.recall()
        );
        (keys, kinds, sentences)
    }

    #[test]
    fn precision_and_recall_on_the_labelled_samples() {
        let (keys, kinds, sentences) = report("tuning sample", SAMPLE);
        assert!(sentences >= 200);
        assert!(
            keys.precision() >= 0.95 && keys.recall() >= 0.95,
            "{keys:?}"
        );
        assert!(
            kinds.precision() >= 0.75 && kinds.recall() >= 0.75,
            "{kinds:?}"
        );
        let (keys, kinds, sentences) = report("held-out sample", HELD_OUT);
        assert!(sentences >= 60);
        assert!(
            keys.precision() >= 0.80 && keys.recall() >= 0.80,
            "{keys:?}"
        );
        assert!(
            kinds.precision() >= 0.60 && kinds.recall() >= 0.60,
            "{kinds:?}"
        );
    }
}
