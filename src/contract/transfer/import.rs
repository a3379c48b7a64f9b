//! Import: every line of a file read and checked first, then written in batches.

use super::*;

/// `POST /v1/import`'s query.
#[derive(Debug, Clone, Default, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportParams {
    /// Skip invalid lines (and report them) instead of refusing the whole import.
    pub skip_invalid: Option<bool>,
    /// Check every line and report what would be written, writing nothing.
    pub dry_run: Option<bool>,
}

/// A line an import refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvalidLine {
    /// Its line number (1 is the header).
    pub line: usize,
    /// Its kind, when it could be read.
    pub kind: Option<String>,
    /// The error code (`invalid_argument`, `permission_denied`, `conflict`).
    pub code: String,
    /// The field at fault.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImportReport {
    /// The header's source backend.
    pub source_backend: String,
    /// The header's mnemos version.
    pub source_version: String,
    /// Records the file holds, by kind.
    #[schema(value_type = Object)]
    pub read: TransferCounts,
    /// Records written.
    #[schema(value_type = Object)]
    pub written: TransferCounts,
    /// Records already stored, left as they were.
    #[schema(value_type = Object)]
    pub unchanged: TransferCounts,
    /// Associations whose memories, and KV entries whose namespace, are not stored.
    #[schema(value_type = Object)]
    pub orphaned: TransferCounts,
    /// Memories whose vector came from the file.
    pub embeddings_reused: u64,
    /// Memories embedded again (no vector in the file, or one of another model).
    pub re_embedded: u64,
    /// Lines refused (with `skip_invalid`; otherwise the import is refused whole).
    pub skipped: Vec<InvalidLine>,
    /// True when nothing was written because `dry_run` asked only for the checks.
    pub dry_run: bool,
}

/// A line as the import reads it: its number and record (None for the header and trailer).
struct ReadLine {
    /// 1-based line number.
    number: usize,
    /// Its kind.
    kind: &'static str,
    /// The record to import.
    record: TransferRecord,
}

/// An invalid line from an error.
fn invalid(number: usize, kind: Option<&str>, error: MemoryError) -> InvalidLine {
    InvalidLine {
        line: number,
        kind: kind.map(str::to_string),
        code: error.code.as_str().to_string(),
        field: error.field,
        message: error.message,
    }
}

/// Parse a field with `parse`, naming `field` on failure.
fn field<T>(field: &str, parsed: MemoryResult<T>) -> MemoryResult<T> {
    parsed.map_err(|mut e| {
        e.field = Some(field.to_string());
        e
    })
}

/// The agent a record names, as the caller may act as it: in the caller's tenant
/// (the operator keeps the record's tenant), and one the caller's key may act as.
fn record_agent(caller: &Caller, tenant: &str, agent: &str) -> MemoryResult<AgentId> {
    let caller = in_tenant(caller, Some(tenant))?;
    caller.agent("agent_id", Some(agent))
}

/// A namespace a record names, in the caller's tenant.
fn record_namespace(caller: &Caller, tenant: &str, name: &str) -> MemoryResult<NamespaceName> {
    let caller = in_tenant(caller, Some(tenant))?;
    let local = field("namespace", NamespaceName::parse(name))?;
    Ok(caller.namespace(&local))
}

/// A memory id as a file names it: 1–128 characters, no control character.
fn memory_id(name: &str, raw: &str) -> MemoryResult<MemoryId> {
    if raw.is_empty() || raw.len() > 128 || raw.chars().any(char::is_control) {
        return Err(MemoryError::invalid(
            name,
            format!("{name} must be 1 to 128 characters without control characters"),
        ));
    }
    Ok(MemoryId(raw.to_string()))
}

/// A memory line as a record, checked against the caller's rights; `model` is the
/// configured embedder's (id, dimension): a vector of another model is dropped (the
/// import embeds the memory again).
fn memory_record(
    caller: &Caller,
    line: MemoryLine,
    model: Option<&(String, usize)>,
) -> MemoryResult<MemoryRecord> {
    let agent = record_agent(caller, &line.tenant, &line.agent_id)?;
    let status = |name: &str, raw: &str| MemoryStatus::parse(name, raw);
    let versions = line
        .versions
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            Ok(MemoryVersion {
                version: v.version,
                content: v.content,
                importance: v.importance,
                tags: v.tags,
                status: status(&format!("versions[{i}].status"), &v.status)?,
                archived_at: v.archived_at,
                reason: v.reason,
            })
        })
        .collect::<MemoryResult<Vec<_>>>()?;
    let embedding = match (line.embedding, model) {
        (Some(e), Some((id, dimension))) if e.model == *id && e.vector.len() == *dimension => {
            if e.dimension != e.vector.len() {
                return Err(MemoryError::invalid(
                    "embedding.dimension",
                    format!(
                        "embedding.dimension is {} but the vector has {} numbers",
                        e.dimension,
                        e.vector.len()
                    ),
                ));
            }
            Some(e.vector)
        }
        _ => None,
    };
    let memory = Memory {
        id: memory_id("id", &line.id)?,
        agent_id: agent,
        memory_type: MemoryType::parse("type", &line.memory_type)?,
        content: line.content,
        title: line.title,
        importance: line.importance,
        tags: line.tags,
        session_id: line
            .session_id
            .as_deref()
            .map(|s| field("session_id", SessionId::parse(s)))
            .transpose()?,
        project_id: line
            .project_id
            .as_deref()
            .map(|p| field("project_id", ProjectId::parse(p)))
            .transpose()?,
        occurred_at: line.occurred_at,
        created_at: line.created_at,
        updated_at: line.updated_at,
        last_accessed_at: line.last_accessed_at,
        access_count: line.access_count,
        consolidation_level: line.consolidation_level,
        valence: line.valence,
        arousal: line.arousal,
        status: status("status", &line.status)?,
        shared: line.shared,
        metadata: line.metadata,
        source: line.source.map(|s| SourceRef {
            path: s.path,
            hash: s.hash,
        }),
        version: line.version,
    };
    Ok(MemoryRecord {
        memory,
        versions,
        embedding,
    })
}

/// One parsed line as a record the caller may import.
fn line_record(
    caller: &Caller,
    line: Line,
    model: Option<&(String, usize)>,
) -> MemoryResult<Option<TransferRecord>> {
    Ok(Some(match line {
        Line::Header(_) | Line::Trailer(_) => return Ok(None),
        Line::Memory(m) => TransferRecord::Memory(Box::new(memory_record(caller, *m, model)?)),
        Line::Edge(e) => TransferRecord::Edge(Association {
            agent_id: record_agent(caller, &e.tenant, &e.agent_id)?,
            from_id: memory_id("from_id", &e.from_id)?,
            to_id: memory_id("to_id", &e.to_id)?,
            relation: e.relation,
            weight: e.weight,
            created_at: e.created_at,
        }),
        Line::Session(s) => {
            let agent = record_agent(caller, &s.tenant, &s.agent_id)?;
            let session = field("session_id", SessionId::parse(&s.session_id))?;
            let messages = s
                .messages
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    Ok(SessionMessage {
                        seq: m.seq,
                        role: field(&format!("messages[{i}].role"), MessageRole::parse(&m.role))?,
                        content: m.content,
                        tokens: m.tokens,
                        at: m.at,
                    })
                })
                .collect::<MemoryResult<Vec<_>>>()?;
            TransferRecord::Session(Box::new(SessionTransfer {
                log: s.log.map(|log| SessionRecord {
                    agent_id: agent.clone(),
                    session_id: session.clone(),
                    last_seq: log.last_seq,
                    compacted_through: log.compacted_through,
                    summary: log.summary,
                    summarized_at: log.summarized_at,
                    pending_tokens: log.pending_tokens,
                    compactions: log.compactions,
                    created_at: log.created_at,
                    last_message_at: log.last_message_at,
                }),
                archive: s
                    .archive
                    .map(|a| {
                        Ok::<_, MemoryError>(ArchiveMark {
                            archived_through: a.archived_through,
                            summary_id: memory_id("archive.summary_id", &a.summary_id)?,
                        })
                    })
                    .transpose()?,
                agent_id: agent,
                session_id: session,
                messages,
            }))
        }
        Line::Project(p) => {
            let agent = record_agent(caller, &p.tenant, &p.agent_id)?;
            let sessions = p
                .sessions
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    Ok((
                        field(
                            &format!("sessions[{i}].session_id"),
                            SessionId::parse(&a.session_id),
                        )?,
                        a.attached_at,
                    ))
                })
                .collect::<MemoryResult<Vec<_>>>()?;
            TransferRecord::Project(ProjectTransfer {
                project: Project {
                    agent_id: agent,
                    project_id: field("project_id", ProjectId::parse(&p.project_id))?,
                    name: p.name,
                    isolated: p.isolated,
                    created_at: p.created_at,
                    updated_at: p.updated_at,
                },
                sessions,
            })
        }
        Line::EntityMerge(m) => {
            TransferRecord::EntityMerge(mnemos_actors::transfer::EntityMergeTransfer {
                agent_id: record_agent(caller, &m.tenant, &m.agent_id)?,
                merge: mnemos_actors::store::entities::EntityMerge {
                    id: m.id,
                    alias: mnemos_actors::policy::entities::entity_key(&m.alias),
                    name: mnemos_actors::policy::entities::entity_key(&m.name),
                    origin: m.origin,
                    memory_id: m
                        .memory_id
                        .map(|id| memory_id("memory_id", &id))
                        .transpose()?,
                    created_at: m.created_at,
                    undone_at: m.undone_at,
                    project_id: m
                        .project_id
                        .map(|p| {
                            mnemos_actors::projects::ProjectId::parse_field("project_id", &p)
                                .map(|p| p.as_str().to_string())
                        })
                        .transpose()?,
                },
            })
        }
        Line::Run(r) => TransferRecord::Run(ConsolidationRun {
            agent_id: Some(record_agent(caller, &r.tenant, &r.agent_id)?),
            id: memory_id("id", &r.id)?.0,
            trigger: r.trigger,
            started_at: r.started_at,
            finished_at: r.finished_at,
            processed: r.processed,
            consolidated: r.consolidated,
            forgotten: r.forgotten,
            new_semantic: r.new_semantic,
            new_procedural: r.new_procedural,
            report: r.report,
        }),
        Line::Namespace(n) => TransferRecord::Namespace(NamespaceTransfer {
            name: record_namespace(caller, &n.tenant, &n.namespace)?,
            max_entries: n.max_entries,
            clock: n.clock,
            hits: n.hits,
            misses: n.misses,
            evictions: n.evictions,
            puts: n.puts,
            created_at: n.created_at,
            updated_at: n.updated_at,
        }),
        Line::KvEntry(e) => {
            if e.key.is_empty() {
                return Err(MemoryError::invalid("key", "key must not be empty"));
            }
            TransferRecord::KvEntry(KvEntry {
                namespace: record_namespace(caller, &e.tenant, &e.namespace)?,
                key: e.key,
                value: e.value,
                tags: e.tags,
                written_by: field("written_by", record_agent(caller, &e.tenant, &e.written_by))?,
                created_at: e.created_at,
                updated_at: e.updated_at,
                expires_at: e.expires_at,
                last_used: e.last_used,
            })
        }
    }))
}

/// Parse one line's JSON: the `kind` first, then the fields of that kind (each failure
/// naming its field).
fn parse_line(text: &str) -> (Option<String>, MemoryResult<Line>) {
    let value: serde_json::Value = match from_json_slice(text.as_bytes()) {
        Ok(value) => value,
        Err(_) => {
            let message = serde_json::from_str::<serde_json::Value>(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return (
                None,
                Err(MemoryError::invalid(
                    "line",
                    format!("not a JSON object: {message}"),
                )),
            );
        }
    };
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .map(str::to_string);
    let Some(kind_name) = kind.clone() else {
        return (
            None,
            Err(MemoryError::invalid(
                "kind",
                "every line needs a \"kind\": header, memory, edge, session, project, run, namespace, kv_entry, entity_merge or trailer",
            )),
        );
    };
    let mut fields = value;
    if let Some(map) = fields.as_object_mut() {
        map.remove("kind");
    }
    let parsed = match kind_name.as_str() {
        "header" => from_json_value(fields).map(Line::Header),
        "memory" => from_json_value(fields).map(|m| Line::Memory(Box::new(m))),
        "edge" => from_json_value(fields).map(Line::Edge),
        "session" => from_json_value(fields).map(|s| Line::Session(Box::new(s))),
        "project" => from_json_value(fields).map(Line::Project),
        "run" => from_json_value(fields).map(Line::Run),
        "namespace" => from_json_value(fields).map(Line::Namespace),
        "kv_entry" => from_json_value(fields).map(Line::KvEntry),
        "entity_merge" => from_json_value(fields).map(Line::EntityMerge),
        "trailer" => from_json_value(fields).map(Line::Trailer),
        other => Err(MemoryError::invalid(
            "kind",
            format!("unknown kind {other:?}: header, memory, edge, session, project, run, namespace, kv_entry, entity_merge or trailer"),
        )),
    };
    (kind, parsed)
}

/// The import's refusal: the invalid lines, the first ten quoted.
fn refusal(problems: &[InvalidLine]) -> MemoryError {
    let first = &problems[0];
    let listed: Vec<String> = problems
        .iter()
        .take(10)
        .map(|p| {
            format!(
                "line {}{}{}: {}",
                p.line,
                p.kind
                    .as_deref()
                    .map(|k| format!(" ({k})"))
                    .unwrap_or_default(),
                p.field
                    .as_deref()
                    .map(|f| format!(" field {f}"))
                    .unwrap_or_default(),
                p.message
            )
        })
        .collect();
    let more = problems.len().saturating_sub(10);
    let code = problems
        .iter()
        .map(|p| p.code.as_str())
        .find(|c| *c != "invalid_argument")
        .and_then(error_code)
        .unwrap_or(ErrorCode::InvalidArgument);
    MemoryError {
        field: first.field.clone().or_else(|| Some("line".into())),
        ..MemoryError::new(
            code,
            format!(
                "nothing was imported: {} invalid line(s): {}{}; fix them, or import with skip_invalid to skip and report them",
                problems.len(),
                listed.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ),
        )
    }
}

/// The error code named `name`.
fn error_code(name: &str) -> Option<ErrorCode> {
    [
        ErrorCode::PermissionDenied,
        ErrorCode::Conflict,
        ErrorCode::InvalidArgument,
    ]
    .into_iter()
    .find(|c| c.as_str() == name)
}

/// Parse a whole file: the header, every record line, the trailer (checked against the
/// lines read). Answers the header, the records, and the invalid lines.
fn read_file(
    caller: &Caller,
    text: &str,
    model: Option<&(String, usize)>,
) -> MemoryResult<(HeaderLine, Vec<ReadLine>, Vec<InvalidLine>, TransferCounts)> {
    let mut header: Option<HeaderLine> = None;
    let mut trailer: Option<(usize, TrailerLine)> = None;
    let mut records = Vec::new();
    let mut problems = Vec::new();
    let mut read = TransferCounts::default();
    for (index, raw) in text.split('\n').enumerate() {
        let number = index + 1;
        let raw = raw.trim_end_matches('\r');
        if raw.trim().is_empty() {
            continue;
        }
        if let Some((at, _)) = &trailer {
            return Err(MemoryError::invalid(
                "trailer",
                format!("line {number}: the trailer (line {at}) must be the last line"),
            ));
        }
        let (kind, parsed) = parse_line(raw);
        if let Some(kind) = &kind {
            count_kind(&mut read, kind);
        }
        let line = match parsed {
            Ok(line) => line,
            Err(error) if header.is_none() => {
                return Err(MemoryError {
                    field: error.field.clone(),
                    ..MemoryError::invalid(
                        "header",
                        format!("line 1 must be the export's header: {}", error.message),
                    )
                });
            }
            Err(error) => {
                problems.push(invalid(number, kind.as_deref(), error));
                continue;
            }
        };
        match line {
            Line::Header(h) => {
                if header.is_some() {
                    problems.push(invalid(
                        number,
                        Some("header"),
                        MemoryError::invalid("kind", "a file has one header, on its first line"),
                    ));
                    continue;
                }
                if h.format != FORMAT || h.format_version != FORMAT_VERSION {
                    return Err(MemoryError::invalid(
                        "format_version",
                        format!(
                            "line {number}: this mnemos reads {FORMAT} version {FORMAT_VERSION}, not {} version {}",
                            h.format, h.format_version
                        ),
                    ));
                }
                header = Some(h);
            }
            Line::Trailer(t) => trailer = Some((number, t)),
            line if header.is_none() => {
                return Err(MemoryError::invalid(
                    "header",
                    format!(
                        "line {number} ({}) comes before the header: a file starts with its header line",
                        line.kind()
                    ),
                ));
            }
            line => {
                let kind = line.kind();
                match line_record(caller, line, model) {
                    Ok(Some(record)) => records.push(ReadLine {
                        number,
                        kind,
                        record,
                    }),
                    Ok(None) => {}
                    Err(error) => problems.push(invalid(number, Some(kind), error)),
                }
            }
        }
    }
    let Some(header) = header else {
        return Err(MemoryError::invalid(
            "header",
            "the file is empty: an export starts with its header line",
        ));
    };
    let Some((_, trailer)) = trailer else {
        return Err(MemoryError::invalid(
            "trailer",
            format!(
                "the file ends without its trailer line after {} record(s): it is truncated; export it again",
                read.total()
            ),
        ));
    };
    if trailer.counts != read {
        return Err(MemoryError::invalid(
            "trailer",
            format!(
                "the trailer counts {:?} but the file holds {:?}: lines are missing or added",
                trailer.counts, read
            ),
        ));
    }
    Ok((header, records, problems, read))
}

/// Import a JSONL file (its whole text): every line is checked first; an invalid line
/// refuses the whole import unless `skip_invalid`, which skips and reports it. Records
/// keep their ids; those already stored are left as they are, so a second import of
/// the same file changes nothing. `progress` is told how many records were written.
pub async fn import(
    runtime: &Runtime,
    caller: &Caller,
    text: &str,
    params: &ImportParams,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> MemoryResult<ImportReport> {
    caller.require(Scope::Write)?;
    let model = runtime.embedding_model().await;
    let (header, lines, mut problems, read) = read_file(caller, text, model.as_ref())?;
    let mut records: Vec<TransferRecord> = Vec::with_capacity(lines.len());
    let mut numbers: Vec<(usize, &'static str)> = Vec::with_capacity(lines.len());
    for line in lines {
        numbers.push((line.number, line.kind));
        records.push(line.record);
    }
    for (index, error) in runtime.check_import(&mut records).await? {
        let (number, kind) = numbers[index];
        problems.push(invalid(number, Some(kind), error));
    }
    problems.sort_by_key(|p| p.line);
    let skip_invalid = params.skip_invalid.unwrap_or(false);
    if !problems.is_empty() && !skip_invalid {
        return Err(refusal(&problems));
    }
    let refused: std::collections::HashSet<usize> = problems.iter().map(|p| p.line).collect();
    let kept: Vec<(&'static str, TransferRecord)> = numbers
        .iter()
        .zip(records)
        .filter(|((number, _), _)| !refused.contains(number))
        .map(|((_, kind), record)| (*kind, record))
        .collect();
    let memories = kept
        .iter()
        .filter(|(_, r)| matches!(r, TransferRecord::Memory(_)))
        .count();
    if caller.key_id.is_some() && !caller.scopes.contains(&Scope::Admin) {
        caller.spend_writes(memories.saturating_sub(1))?;
    }
    let mut report = ImportReport {
        source_backend: header.source_backend,
        source_version: header.mnemos_version,
        read,
        skipped: problems,
        dry_run: params.dry_run.unwrap_or(false),
        ..ImportReport::default()
    };
    if report.dry_run {
        return Ok(report);
    }
    let total = kept.len() as u64;
    let mut done = 0u64;
    progress(0, total);
    let mut batch: Vec<TransferRecord> = Vec::new();
    let mut kinds: Vec<&'static str> = Vec::new();
    let mut rest = kept.into_iter().peekable();
    while rest.peek().is_some() {
        batch.clear();
        kinds.clear();
        for (kind, record) in rest.by_ref().take(mnemos_actors::runtime::IMPORT_BATCH) {
            kinds.push(kind);
            batch.push(record);
        }
        // For each memory: whether the file brought its vector.
        let vectors: Vec<Option<bool>> = batch
            .iter()
            .map(|r| match r {
                TransferRecord::Memory(m) => Some(m.embedding.is_some()),
                _ => None,
            })
            .collect();
        let outcomes = runtime.import(std::mem::take(&mut batch)).await?;
        for (vector, outcome) in vectors.iter().zip(&outcomes) {
            match (vector, outcome) {
                (Some(true), ImportOutcome::Written) => report.embeddings_reused += 1,
                (Some(false), ImportOutcome::Written) => report.re_embedded += 1,
                _ => {}
            }
        }
        for (kind, outcome) in kinds.iter().zip(&outcomes) {
            let counts = match outcome {
                ImportOutcome::Written => &mut report.written,
                ImportOutcome::Unchanged => &mut report.unchanged,
                ImportOutcome::Orphaned => &mut report.orphaned,
            };
            count_kind(counts, kind);
        }
        done += outcomes.len() as u64;
        progress(done, total);
    }
    Ok(report)
}
