//! `mnemos doctor`: find the rows that reads skip because a column cannot be decoded,
//! and repair them.
//!
//! Such rows come from older versions that accepted instants outside the years 1–9999
//! (SQLite stores instants as text, and wrote `-0001-…` it could not parse back) or from
//! hand edits. A repair rewrites each unreadable instant as the nearest instant mnemos
//! stores (0001-01-01 for one before year 1, 9999-12-31 for one after 9999, the repair's
//! time for text that is no instant at all), malformed tags or metadata of a memory as
//! empty, an unknown type as episodic and an unknown status as archived, and reports
//! every change. PostgreSQL's typed columns hold no bad instant or JSON, but a type or
//! status column can still hold a name no version knows.

use chrono::{DateTime, TimeZone, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{MemoryStatus, MemoryType};
use mnemos_actors::store::UnreadableRow;
use serde::Serialize;

use super::dialect::{Dialect, SqlStore};
use super::rows::Columns;
use super::sql::{Arg, Statement};

/// A table whose rows hold instants: its key columns (integer keys marked) and its
/// instant columns (nullable ones may be NULL).
struct TimedTable {
    /// Table name.
    table: &'static str,
    /// Key columns, and whether each is an integer.
    key: &'static [(&'static str, bool)],
    /// Instant columns.
    times: &'static [&'static str],
}

/// Every table a read decodes instants from.
const TABLES: &[TimedTable] = &[
    TimedTable {
        table: "memories",
        key: &[("id", false)],
        times: &[
            "occurred_at",
            "created_at",
            "updated_at",
            "last_accessed_at",
        ],
    },
    TimedTable {
        table: "memory_versions",
        key: &[("memory_id", false), ("version", true)],
        times: &["archived_at"],
    },
    TimedTable {
        table: "session_messages",
        key: &[("agent_id", false), ("session_id", false), ("seq", true)],
        times: &["at"],
    },
    TimedTable {
        table: "sessions",
        key: &[("agent_id", false), ("session_id", false)],
        times: &["created_at", "last_message_at", "summarized_at"],
    },
    TimedTable {
        table: "consolidation_runs",
        key: &[("id", false)],
        times: &["started_at", "finished_at"],
    },
    TimedTable {
        table: "associations",
        key: &[
            ("agent_id", false),
            ("from_id", false),
            ("to_id", false),
            ("relation", false),
        ],
        times: &["created_at"],
    },
];

/// One repaired value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repair {
    /// The table.
    pub table: String,
    /// The row's key (`/`-joined key columns).
    pub id: String,
    /// The column rewritten.
    pub column: String,
    /// What was stored.
    pub was: String,
    /// What is stored now.
    pub now: String,
}

/// The earliest instant mnemos stores.
fn earliest() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0)
        .single()
        .expect("year 1 is a valid date")
}

/// The latest instant mnemos stores.
fn latest() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .expect("year 9999 is a valid date")
        + chrono::Duration::microseconds(999_999)
}

/// The instant an unreadable stored text is repaired to.
fn nearest_storable(raw: &str, otherwise: DateTime<Utc>) -> DateTime<Utc> {
    let text = raw.trim();
    let year_digits = text.split('-').next().unwrap_or_default();
    if text.starts_with('-') || year_digits.trim_start_matches('0').is_empty() {
        earliest()
    } else if text.starts_with('+')
        || (year_digits.len() > 4 && year_digits.chars().all(|c| c.is_ascii_digit()))
    {
        latest()
    } else {
        otherwise
    }
}

/// A problem found in one row.
struct Finding {
    /// The table.
    table: &'static str,
    /// Key values, as bound in a `WHERE`.
    key: Vec<(&'static str, KeyValue)>,
    /// The column and its stored text (None when not even text).
    column: &'static str,
    /// What was stored, as text.
    raw: Option<String>,
    /// Why it could not be read.
    error: String,
}

/// One key column's value.
#[derive(Clone)]
enum KeyValue {
    /// A text key.
    Text(String),
    /// An integer key.
    Integer(i64),
}

impl Finding {
    fn key_text(&self) -> String {
        self.key
            .iter()
            .map(|(_, v)| match v {
                KeyValue::Text(t) => t.clone(),
                KeyValue::Integer(i) => i.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/")
    }
}

impl<D: Dialect> SqlStore<D> {
    /// Every row a read would skip, and why (`mnemos doctor`).
    pub async fn find_unreadable(&self) -> MemoryResult<Vec<UnreadableRow>> {
        Ok(self
            .findings()
            .await?
            .into_iter()
            .map(|f| UnreadableRow {
                table: f.table.to_string(),
                id: f.key_text(),
                error: format!("{}: {}", f.column, f.error),
            })
            .collect())
    }

    /// Repair every unreadable row (`mnemos doctor --repair`); answers what changed.
    pub async fn repair_unreadable(&self, now: DateTime<Utc>) -> MemoryResult<Vec<Repair>> {
        let mut repairs = Vec::new();
        for finding in self.findings().await? {
            let (value, shown) = if let Some(text) = replacement_text(finding.column) {
                (RepairValue::Json(text), text.to_string())
            } else {
                let at = nearest_storable(finding.raw.as_deref().unwrap_or_default(), now);
                (RepairValue::Time(at), at.to_rfc3339())
            };
            let mut text = format!(
                "UPDATE {} SET {} = $1 WHERE ",
                finding.table, finding.column
            );
            let mut args = vec![match &value {
                RepairValue::Time(at) => Arg::Time(*at),
                RepairValue::Json(empty) => Arg::Text(empty),
            }];
            for (index, (column, key)) in finding.key.iter().enumerate() {
                if index > 0 {
                    text.push_str(" AND ");
                }
                text.push_str(&format!("{column} = ${}", index + 2));
                args.push(match key {
                    KeyValue::Text(t) => Arg::Text(t),
                    KeyValue::Integer(i) => Arg::Integer(*i),
                });
            }
            self.run_alone(&Statement::new(text, args)).await?;
            repairs.push(Repair {
                table: finding.table.to_string(),
                id: finding.key_text(),
                column: finding.column.to_string(),
                was: finding.raw.clone().unwrap_or_else(|| "(unreadable)".into()),
                now: shown,
            });
        }
        self.unreadable.clear();
        Ok(repairs)
    }

    /// Read every instant column of every table, and a memory's tags and metadata.
    async fn findings(&self) -> MemoryResult<Vec<Finding>> {
        let mut found = Vec::new();
        for table in TABLES {
            let key_columns: Vec<&str> = table.key.iter().map(|(c, _)| *c).collect();
            let mut columns = key_columns.clone();
            columns.extend(table.times);
            if table.table == "memories" {
                columns.extend(["tags", "metadata", "memory_type", "status"]);
            }
            let statement = Statement::new(
                format!("SELECT {} FROM {}", columns.join(", "), table.table),
                [],
            );
            for row in self.rows(&statement).await? {
                let key: Vec<(&'static str, KeyValue)> = table
                    .key
                    .iter()
                    .map(|(column, integer)| {
                        let value = if *integer {
                            KeyValue::Integer(row.integer(column).unwrap_or(-1))
                        } else {
                            KeyValue::Text(row.text(column).unwrap_or_default())
                        };
                        (*column, value)
                    })
                    .collect();
                let mut problems: Vec<(&'static str, String)> = Vec::new();
                for column in table.times {
                    if let Err(error) = row.optional_time(column) {
                        problems.push((column, error.message));
                    }
                }
                if table.table == "memories" {
                    if let Ok(Err(error)) = row.tags("tags") {
                        problems.push(("tags", error.to_string()));
                    }
                    if let Ok(Err(error)) = row.json("metadata") {
                        problems.push(("metadata", error.to_string()));
                    }
                    if let Err(error) = row
                        .text("memory_type")
                        .and_then(|t| MemoryType::parse("type", &t))
                    {
                        problems.push(("memory_type", error.message));
                    }
                    if let Err(error) = row
                        .text("status")
                        .and_then(|t| MemoryStatus::parse("status", &t))
                    {
                        problems.push(("status", error.message));
                    }
                }
                for (column, error) in problems {
                    found.push(Finding {
                        table: table.table,
                        key: key.clone(),
                        column,
                        raw: row.optional_text(column).ok().flatten(),
                        error,
                    });
                }
            }
        }
        Ok(found)
    }
}

/// What a repair writes into a column that is not an instant: empty tags or metadata;
/// an unknown type reads as episodic and an unknown status as archived (kept, out of
/// recall, for a person to look at).
fn replacement_text(column: &str) -> Option<&'static str> {
    match column {
        "tags" => Some("[]"),
        "metadata" => Some("{}"),
        "memory_type" => Some("episodic"),
        "status" => Some("archived"),
        _ => None,
    }
}

/// The value a repair writes.
enum RepairValue {
    /// An instant.
    Time(DateTime<Utc>),
    /// Text (a JSON document's, or a type or status name).
    Json(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_instant_is_repaired_to_the_nearest_one_stored() {
        let now = Utc::now();
        assert_eq!(
            nearest_storable("-0001-01-01T00:00:00.000000Z", now),
            earliest()
        );
        assert_eq!(
            nearest_storable("0000-06-01T00:00:00.000000Z", now),
            earliest()
        );
        assert_eq!(
            nearest_storable("+10000-01-01T00:00:00.000000Z", now),
            latest()
        );
        assert_eq!(
            nearest_storable("262143-01-01T00:00:00.000000Z", now),
            latest()
        );
        assert_eq!(nearest_storable("yesterday", now), now);
        assert_eq!(latest().to_rfc3339(), "9999-12-31T23:59:59.999999+00:00");
    }
}
