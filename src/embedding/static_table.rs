//! The static embedder: a table of one vector per WordPiece token, distilled from a
//! sentence-transformers model by `mnemos embedder distill` (`distill.rs`), so that a
//! sentence vector is the weighted mean of its tokens' vectors. It knows meaning the
//! way its teacher's token outputs do, needs no model server and no download (the
//! table of all-MiniLM-L6-v2 is compiled into the binary), and embeds a text in
//! microseconds.
//!
//! File layout (little-endian), version 1:
//! `MNEMOSST`, u32 version, u32 dimension, u32 vocabulary size, u32 `[UNK]` id,
//! u32 longest word in characters, u32 most pieces read per text, u32 length + UTF-8
//! description of the source; then per token a u16 length + UTF-8 text; then per
//! token an f32 scale; then per token `dimension` i8 components. A token's vector is
//! `scale · components` with its frequency weight already applied, so a sentence is
//! the L2-normalised sum of its pieces' vectors.

use std::borrow::Cow;
use std::path::Path;

use mnemos_actors::embedding::{l2_normalize, Embedder};
use mnemos_actors::error::{MemoryError, MemoryResult};

use super::wordpiece::WordPiece;

/// The table distilled from all-MiniLM-L6-v2 (Apache-2.0, by the sentence-transformers
/// authors) with `mnemos embedder distill`; the default embedder's weights.
pub const MINILM_TABLE: &[u8] = include_bytes!("all-MiniLM-L6-v2.static");

/// First bytes of every table file.
const MAGIC: &[u8; 8] = b"MNEMOSST";

/// The layout version this build reads and writes.
const VERSION: u32 = 1;

/// Configuration field blamed for an unreadable table.
const TABLE_FIELD: &str = "embedding.static_table";

/// A model's vocabulary as its `tokenizer.json` declares it.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Token texts by id.
    pub tokens: Vec<String>,
    /// Id of `[UNK]`.
    pub unk: u32,
    /// Words longer than this many characters are `[UNK]`.
    pub max_chars_per_word: usize,
}

impl Vocabulary {
    /// The id of `token`, if the vocabulary has it.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.tokens
            .iter()
            .position(|t| t == token)
            .and_then(|i| u32::try_from(i).ok())
    }
}

/// The WordPiece vocabulary of the sentence-transformers model in `dir`.
pub fn vocabulary_of(dir: &Path) -> MemoryResult<Vocabulary> {
    let path = dir.join("tokenizer.json");
    let bad = |message: String| MemoryError::invalid("embedding.model_dir", message);
    let bytes =
        std::fs::read(&path).map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("{} is not JSON: {e}", path.display())))?;
    let model = &json["model"];
    if model["type"].as_str() != Some("WordPiece") {
        return Err(bad(format!(
            "{} is not a WordPiece tokenizer (model.type is {}); only BERT-family models can be distilled",
            path.display(),
            model["type"]
        )));
    }
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad(format!("{} has no model.vocab", path.display())))?;
    let mut tokens = vec![String::new(); vocab.len()];
    for (token, id) in vocab {
        let id = id
            .as_u64()
            .and_then(|id| usize::try_from(id).ok())
            .filter(|&id| id < tokens.len())
            .ok_or_else(|| bad(format!("{}: token {token:?} has a bad id", path.display())))?;
        tokens[id] = token.clone();
    }
    let unk_token = model["unk_token"].as_str().unwrap_or("[UNK]");
    let unk = vocab
        .get(unk_token)
        .and_then(|id| id.as_u64())
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| bad(format!("{} has no {unk_token} token", path.display())))?;
    let max_chars_per_word = model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize;
    Ok(Vocabulary {
        tokens,
        unk,
        max_chars_per_word,
    })
}

/// A parsed table: what `mnemos embedder distill` writes.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticTable {
    /// Length of every token vector (and of the sentence vectors).
    pub dimension: usize,
    /// Token texts by id (the teacher's WordPiece vocabulary).
    pub tokens: Vec<String>,
    /// Id of `[UNK]`.
    pub unk: u32,
    /// Words longer than this many characters are `[UNK]`.
    pub max_chars_per_word: usize,
    /// Most pieces of one text that count (the teacher's sequence limit).
    pub max_pieces: usize,
    /// Where the table came from (model, options), for people and the model id.
    pub source: String,
    /// Per token: the factor of its quantised components (0 for tokens without meaning).
    pub scales: Vec<f32>,
    /// Per token, `dimension` quantised components (i8, as their two's-complement
    /// bytes), row after row. Borrowed from the binary for the compiled-in table, so its
    /// 7.8 MB are not held twice (in the binary's mapped pages and on the heap).
    pub components: Cow<'static, [u8]>,
}

impl StaticTable {
    /// Quantise `vectors` (one per token, already weighted) to one i8 row and scale each.
    pub fn quantize(
        vocabulary: &Vocabulary,
        max_pieces: usize,
        source: String,
        vectors: &[Vec<f32>],
    ) -> Self {
        let dimension = vectors.first().map_or(0, Vec::len);
        let mut scales = Vec::with_capacity(vectors.len());
        let mut components = Vec::with_capacity(vectors.len() * dimension);
        for vector in vectors {
            let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let scale = largest / 127.0;
            scales.push(scale);
            for x in vector {
                let q = if scale > 0.0 {
                    (x / scale).round().clamp(-127.0, 127.0)
                } else {
                    0.0
                };
                components.push(q as i8 as u8);
            }
        }
        Self {
            dimension,
            tokens: vocabulary.tokens.clone(),
            unk: vocabulary.unk,
            max_chars_per_word: vocabulary.max_chars_per_word,
            max_pieces,
            source,
            scales,
            components: Cow::Owned(components),
        }
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.components.len() + self.scales.len() * 4);
        out.extend_from_slice(MAGIC);
        for value in [
            VERSION,
            self.dimension as u32,
            self.tokens.len() as u32,
            self.unk,
            self.max_chars_per_word as u32,
            self.max_pieces as u32,
            self.source.len() as u32,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(self.source.as_bytes());
        for token in &self.tokens {
            out.extend_from_slice(&(token.len() as u16).to_le_bytes());
            out.extend_from_slice(token.as_bytes());
        }
        for scale in &self.scales {
            out.extend_from_slice(&scale.to_le_bytes());
        }
        out.extend_from_slice(&self.components);
        out
    }

    /// Parse a table file; `origin` names it in errors.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> MemoryResult<Self> {
        Self::parse(bytes, origin, |components| Cow::Owned(components.to_vec()))
    }

    /// [`Self::from_bytes`] of bytes that live as long as the program (the compiled-in
    /// table): the components are read in place, not copied.
    pub fn from_static(bytes: &'static [u8], origin: &str) -> MemoryResult<Self> {
        Self::parse(bytes, origin, Cow::Borrowed)
    }

    /// Parse a table file; `keep` turns the components' bytes into what the table holds.
    fn parse<'a>(
        bytes: &'a [u8],
        origin: &str,
        keep: impl FnOnce(&'a [u8]) -> Cow<'static, [u8]>,
    ) -> MemoryResult<Self> {
        let bad = |what: &str| {
            MemoryError::invalid(
                TABLE_FIELD,
                format!("{origin} is not a static embedding table ({what}); make one with `mnemos embedder distill`"),
            )
        };
        let mut reader = Reader { bytes, at: 0 };
        if reader.take(8).ok_or_else(|| bad("too short"))? != MAGIC {
            return Err(bad("no MNEMOSST header"));
        }
        let mut header = [0u32; 7];
        for value in &mut header {
            *value = reader.u32().ok_or_else(|| bad("truncated header"))?;
        }
        let [version, dimension, vocab, unk, max_chars, max_pieces, source_len] = header;
        if version != VERSION {
            return Err(bad(&format!(
                "layout version {version}, this build reads {VERSION}"
            )));
        }
        let (dimension, vocab) = (dimension as usize, vocab as usize);
        if !(1..=4096).contains(&dimension) || vocab == 0 || unk as usize >= vocab {
            return Err(bad("implausible header"));
        }
        let source = reader
            .take(source_len as usize)
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| bad("bad description"))?
            .to_string();
        let mut tokens = Vec::with_capacity(vocab);
        for _ in 0..vocab {
            let len = reader.u16().ok_or_else(|| bad("truncated vocabulary"))?;
            let text = reader
                .take(len as usize)
                .and_then(|b| std::str::from_utf8(b).ok())
                .ok_or_else(|| bad("bad token text"))?;
            tokens.push(text.to_string());
        }
        let mut scales = Vec::with_capacity(vocab);
        for _ in 0..vocab {
            let bits = reader.u32().ok_or_else(|| bad("truncated scales"))?;
            let scale = f32::from_bits(bits);
            if !scale.is_finite() || scale < 0.0 {
                return Err(bad("a scale is not a finite non-negative number"));
            }
            scales.push(scale);
        }
        let components = reader
            .take(vocab * dimension)
            .ok_or_else(|| bad("truncated vectors"))?;
        if reader.at != bytes.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(Self {
            dimension,
            tokens,
            unk,
            max_chars_per_word: max_chars as usize,
            max_pieces: max_pieces as usize,
            source,
            scales,
            components: keep(components),
        })
    }
}

/// A cursor over a table file.
struct Reader<'a> {
    /// The whole file.
    bytes: &'a [u8],
    /// Offset of the next unread byte.
    at: usize,
}

impl<'a> Reader<'a> {
    /// The next `len` bytes, if there are that many.
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(len)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }
    /// The next little-endian u32.
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// The next little-endian u16.
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
}

/// An embedder that sums the table vectors of a text's WordPiece pieces.
pub struct StaticEmbedder {
    /// Splits texts into the table's token ids.
    tokenizer: WordPiece,
    /// The token vectors (quantised) and their scales.
    table: StaticTable,
    /// `static-<dimension>-<hash of the table>`, so stores refuse vectors of another table.
    model_id: String,
}

impl std::fmt::Debug for StaticEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticEmbedder")
            .field("model_id", &self.model_id)
            .field("source", &self.table.source)
            .finish_non_exhaustive()
    }
}

impl StaticEmbedder {
    /// The embedder of the compiled-in all-MiniLM-L6-v2 table.
    pub fn minilm() -> MemoryResult<Self> {
        let origin = "the compiled-in all-MiniLM-L6-v2 table";
        Self::with_table(
            StaticTable::from_static(MINILM_TABLE, origin)?,
            MINILM_TABLE,
        )
    }

    /// The embedder of the table file at `path`.
    pub fn load(path: &Path) -> MemoryResult<Self> {
        let bytes = std::fs::read(path).map_err(|e| {
            MemoryError::invalid(TABLE_FIELD, format!("cannot read {}: {e}", path.display()))
        })?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }

    /// The embedder of a table's bytes.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> MemoryResult<Self> {
        Self::with_table(StaticTable::from_bytes(bytes, origin)?, bytes)
    }

    /// The embedder of `table`, parsed from `bytes` (whose hash names the model).
    fn with_table(table: StaticTable, bytes: &[u8]) -> MemoryResult<Self> {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let model_id = format!("static-{}-{:012x}", table.dimension, hash >> 16);
        let tokenizer = WordPiece::new(&table.tokens, table.unk, table.max_chars_per_word);
        Ok(Self {
            tokenizer,
            table,
            model_id,
        })
    }

    /// Where the table came from, as recorded by `distill`.
    pub fn source(&self) -> &str {
        &self.table.source
    }

    /// The unnormalised sum of the pieces' vectors of `text`.
    fn embed_one(&self, text: &str) -> Vec<f32> {
        let dimension = self.table.dimension;
        let mut sum = vec![0.0f32; dimension];
        for id in self.tokenizer.encode(text, self.table.max_pieces) {
            let id = id as usize;
            let scale = self.table.scales[id];
            if scale == 0.0 {
                continue;
            }
            let row = &self.table.components[id * dimension..(id + 1) * dimension];
            for (acc, &q) in sum.iter_mut().zip(row) {
                *acc += scale * f32::from(q as i8);
            }
        }
        l2_normalize(&mut sum);
        sum
    }
}

impl Embedder for StaticEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn dimension(&self) -> usize {
        self.table.dimension
    }
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|text| self.embed_one(text)).collect())
    }
    fn parallel_batches(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemos_actors::embedding::dot;

    fn cosine(embedder: &StaticEmbedder, a: &str, b: &str) -> f32 {
        let v = embedder.embed_batch(&[a, b]).unwrap();
        dot(&v[0], &v[1])
    }

    #[test]
    fn the_compiled_in_table_knows_meaning() {
        let embedder = StaticEmbedder::minilm().unwrap();
        assert!(embedder.model_id().starts_with("static-"));
        let v = embedder.embed("The cat sits on the mat.").unwrap();
        assert_eq!(v.len(), embedder.dimension());
        assert!((dot(&v, &v) - 1.0).abs() < 1e-4);
        // Paraphrases with no content word in common are closer than an unrelated text.
        let near = cosine(
            &embedder,
            "The cat sits on the mat.",
            "A kitten is lying on a rug.",
        );
        let far = cosine(
            &embedder,
            "The cat sits on the mat.",
            "Quarterly revenue grew by ten percent.",
        );
        assert!(near > far + 0.2, "near {near}, far {far}");
        let grinder = cosine(
            &embedder,
            "My coffee grinder makes the beans too coarse.",
            "The burr mill for my espresso grinds unevenly.",
        );
        let river = cosine(
            &embedder,
            "My coffee grinder makes the beans too coarse.",
            "We ran the rapids on the river last weekend.",
        );
        assert!(grinder > river + 0.15, "grinder {grinder}, river {river}");
    }

    #[test]
    fn empty_and_unknown_texts_give_zero_vectors_and_batches_match_singles() {
        let embedder = StaticEmbedder::minilm().unwrap();
        let empty = embedder.embed("").unwrap();
        assert!(empty.iter().all(|x| *x == 0.0));
        let texts = [
            "deploy on Tuesdays",
            "",
            "ß 日本 🦀",
            "the staging DB runs on port 5433",
        ];
        let batch = embedder.embed_batch(&texts).unwrap();
        for (text, vector) in texts.iter().zip(&batch) {
            assert_eq!(&embedder.embed(text).unwrap(), vector);
        }
    }

    #[test]
    fn a_table_survives_its_bytes_and_damage_is_refused_naming_the_setting() {
        let table = StaticTable::from_bytes(MINILM_TABLE, "test").unwrap();
        assert_eq!(table.to_bytes(), MINILM_TABLE);
        // The compiled-in table is read in place, and reads the same as a copy.
        let in_place = StaticTable::from_static(MINILM_TABLE, "test").unwrap();
        assert!(matches!(in_place.components, Cow::Borrowed(_)));
        assert!(matches!(table.components, Cow::Owned(_)));
        assert_eq!(in_place, table);
        let embedder = StaticEmbedder::minilm().unwrap();
        assert!(matches!(embedder.table.components, Cow::Borrowed(_)));
        assert_eq!(
            embedder.model_id(),
            StaticEmbedder::from_bytes(MINILM_TABLE, "copy")
                .unwrap()
                .model_id()
        );
        for damaged in [
            &MINILM_TABLE[..MINILM_TABLE.len() - 1],
            &MINILM_TABLE[..20],
            b"not a table at all",
        ] {
            let err = StaticTable::from_bytes(damaged, "damaged.static").unwrap_err();
            assert_eq!(err.field.as_deref(), Some(TABLE_FIELD));
            assert!(err.message.contains("damaged.static"), "{}", err.message);
        }
    }
}
