//! Backend adapters of the store traits.

pub mod sqlite;
