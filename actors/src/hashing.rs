//! A fast hasher for the in-process indexes' short keys (terms, memory ids), seeded once
//! per process from std's random state so that crafted keys cannot be made to collide
//! across restarts. std's SipHash was a fifth of the keyword index's load time.

use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;

/// The process's seed (std's random keys, drawn once).
static SEED: LazyLock<u64> = LazyLock::new(|| {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x9e37_79b9_7f4a_7c15);
    hasher.finish()
});

/// Multiplier of the mixing steps (an odd constant with well spread bits).
const K: u64 = 0x5851_f42d_4c95_7f2d;

/// Builds [`FastHasher`]s with the process's seed; the `S` of the indexes' hash maps.
#[derive(Debug, Clone, Copy)]
pub struct FastState(u64);

impl Default for FastState {
    fn default() -> Self {
        Self(*SEED)
    }
}

impl BuildHasher for FastState {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(self.0)
    }
}

/// The length, then eight bytes per multiply, a final avalanche so every bit of the result depends on
/// every input bit (the hash map takes its control bits from the top).
#[derive(Debug, Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        // The length first, so a short key padded with zeros is not a longer one.
        self.0 = (self.0 ^ bytes.len() as u64)
            .wrapping_mul(K)
            .rotate_left(29);
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0 ^ u64::from_le_bytes(word))
                .wrapping_mul(K)
                .rotate_left(29);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0 ^ u64::from_le_bytes(word))
                .wrapping_mul(K)
                .rotate_left(29);
        }
    }
    fn write_u8(&mut self, byte: u8) {
        self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(K).rotate_left(29);
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A hash map keyed by short strings, hashed with [`FastState`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(text: &str) -> u64 {
        FastState::default().hash_one(text)
    }

    #[test]
    fn equal_keys_hash_alike_and_near_keys_apart() {
        assert_eq!(hash("grinder"), hash("grinder"));
        let mut seen = std::collections::HashSet::new();
        for n in 0..100_000 {
            assert!(seen.insert(hash(&format!("term{n}"))), "collision at {n}");
        }
        // Prefixes and lengths differ: "ab" is not "ab\0".
        assert_ne!(hash("ab"), hash("ab\0"));
        assert_ne!(hash("abcdefgh"), hash("abcdefgh\0"));
        let mut map: FastMap<String, u32> = FastMap::default();
        map.insert("a".into(), 1);
        assert_eq!(map.get("a"), Some(&1));
    }
}
