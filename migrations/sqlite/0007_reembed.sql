-- Vectors of the next embedding model while `mnemos reindex --reembed` works: filled in
-- the background, swapped into memory_embeddings in one transaction when every memory
-- has one. `source_hash` is the hash of the text a vector was made from, so a memory
-- whose text changed meanwhile is embedded again.
CREATE TABLE memory_embeddings_next (
    memory_id   TEXT PRIMARY KEY NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    vector      BLOB NOT NULL,                           -- little-endian f32
    source_hash TEXT NOT NULL
);
