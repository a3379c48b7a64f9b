//! Backend adapters of the store traits, and the choice of system of record.
//!
//! Both SQL stores are one `SqlStore` over a `Dialect`: the trait
//! implementations are written once (`memories`, `graph`, `projects`, `kv`), with the
//! statements both databases run as written in `sql`, the reading of rows in `rows`,
//! and what each database does its own way in `sqlite` and `postgres`.

mod dialect;
mod doctor;
pub mod entities;
mod graph;
mod keys;
pub(crate) mod keyword;
mod kv;
mod memories;
pub mod model_entities;
pub mod postgres;
mod projects;
mod rows;
mod sql;
pub mod sqlite;
mod transfer;

#[cfg(test)]
mod conformance;

use std::sync::Arc;

use mnemos_actors::error::MemoryResult;
use mnemos_actors::store::kv::KvStore;
use mnemos_actors::store::projects::ProjectStore;
use mnemos_actors::store::{GraphStore, MemoryStore};

use crate::config::Settings;
pub use doctor::Repair;
use postgres::PostgresStore;
use sqlite::{SqliteStore, SqliteTuning};

/// The system of record the settings chose (`storage.backend`).
#[derive(Clone, Debug)]
pub enum SystemOfRecord {
    /// Embedded SQLite file.
    Sqlite(Arc<SqliteStore>),
    /// A PostgreSQL server.
    Postgres(Arc<PostgresStore>),
}

impl SystemOfRecord {
    /// Open (and migrate) the store named by `storage.backend`.
    pub async fn open(settings: &Settings) -> MemoryResult<Self> {
        match settings.storage.backend.as_str() {
            "postgres" => Ok(Self::Postgres(Arc::new(
                PostgresStore::open(settings.storage.url.trim()).await?,
            ))),
            _ => Ok(Self::Sqlite(Arc::new(
                SqliteStore::open_tuned(
                    &settings.sqlite_path(),
                    SqliteTuning {
                        mmap_bytes: settings.storage.mmap_mib * 1024 * 1024,
                        cache_mib: settings.storage.cache_mib,
                    },
                )
                .await?,
            ))),
        }
    }

    /// The store as the runtime's system of record.
    pub fn memories(&self) -> Arc<dyn MemoryStore> {
        match self {
            Self::Sqlite(store) => store.clone(),
            Self::Postgres(store) => store.clone(),
        }
    }

    /// The same store as the association graph (edges live beside the memories).
    pub fn graph(&self) -> Arc<dyn GraphStore> {
        match self {
            Self::Sqlite(store) => store.clone(),
            Self::Postgres(store) => store.clone(),
        }
    }

    /// The same store as the projects store.
    pub fn projects(&self) -> Arc<dyn ProjectStore> {
        match self {
            Self::Sqlite(store) => store.clone(),
            Self::Postgres(store) => store.clone(),
        }
    }

    /// The same store as the keeper of API keys and the audit log.
    pub fn keys(&self) -> Arc<dyn crate::auth::keys::KeyStore> {
        match self {
            Self::Sqlite(store) => store.clone(),
            Self::Postgres(store) => store.clone(),
        }
    }

    /// The same store as the KV namespaces store.
    pub fn kv(&self) -> Arc<dyn KvStore> {
        match self {
            Self::Sqlite(store) => store.clone(),
            Self::Postgres(store) => store.clone(),
        }
    }

    /// The entity index in this database, as a projection to keep and as reads; with
    /// a `thought` that names entities ([`InnerThought::names_entities`]), also the
    /// task that asks it about each memory in the background (stop it before closing).
    ///
    /// [`InnerThought::names_entities`]: mnemos_actors::thought::InnerThought::names_entities
    pub fn entity_index(
        &self,
        thought: &Arc<dyn mnemos_actors::thought::InnerThought>,
    ) -> (
        Arc<dyn mnemos_actors::store::Projection>,
        Arc<dyn mnemos_actors::store::entities::EntityIndex>,
        Option<model_entities::NamingTask>,
    ) {
        fn build<D: dialect::Dialect>(
            store: dialect::SqlStore<D>,
            thought: &Arc<dyn mnemos_actors::thought::InnerThought>,
        ) -> (
            Arc<dyn mnemos_actors::store::Projection>,
            Arc<dyn mnemos_actors::store::entities::EntityIndex>,
            Option<model_entities::NamingTask>,
        ) {
            if !thought.names_entities() {
                let index = Arc::new(entities::EntityProjection::new(store));
                return (index.clone(), index, None);
            }
            let queue = model_entities::NamingQueue::new();
            let index =
                Arc::new(entities::EntityProjection::new(store.clone()).with_naming(queue.clone()));
            let task = model_entities::start(store, index.clone(), thought.clone(), queue);
            (index.clone(), index, Some(task))
        }
        match self {
            Self::Sqlite(store) => build((**store).clone(), thought),
            Self::Postgres(store) => build((**store).clone(), thought),
        }
    }

    /// Every row reads skip because a column cannot be decoded (`mnemos doctor`).
    pub async fn find_unreadable(&self) -> MemoryResult<Vec<mnemos_actors::store::UnreadableRow>> {
        match self {
            Self::Sqlite(store) => store.find_unreadable().await,
            Self::Postgres(store) => store.find_unreadable().await,
        }
    }

    /// Repair every such row (`mnemos doctor --repair`); answers what changed.
    pub async fn repair_unreadable(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> MemoryResult<Vec<Repair>> {
        match self {
            Self::Sqlite(store) => store.repair_unreadable(now).await,
            Self::Postgres(store) => store.repair_unreadable(now).await,
        }
    }

    /// Close the connection pool.
    pub async fn close(&self) {
        match self {
            Self::Sqlite(store) => store.close().await,
            Self::Postgres(store) => store.close().await,
        }
    }
}

/// `url` with any password replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://mnemos:secret@db:5432/m?sslmode=disable"),
            "postgres://mnemos:***@db:5432/m?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1/test"),
            "postgres://postgres@127.0.0.1/test"
        );
        assert_eq!(redact_url("nonsense"), "nonsense");
    }
}
