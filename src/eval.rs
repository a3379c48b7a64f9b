//! `mnemos eval locomo FILE`: the retrieval protocol of `shared/bench/README.md`.
//!
//! Every turn is stored as an episodic memory (`"<speaker>: <text>"`, plus
//! ` [shares <caption>]`), at its session's date, with `metadata.dia_id`; every
//! question of categories 1–4 with a resolvable evidence id is recalled as-is, and the
//! ranked `dia_id`s are scored. No LLM is involved.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use mnemos_actors::model::{AgentId, MemoryType, SessionId};
use mnemos_actors::runtime::{RecallInput, RememberInput};
use serde::Serialize;
use serde_json::Value;

use crate::app::Services;
use crate::config::Settings;

/// Options of `mnemos eval locomo`.
#[derive(Debug, Clone, clap::Args)]
pub struct LocomoArgs {
    /// The LoCoMo JSON file (a list of samples).
    pub file: PathBuf,
    /// Embedder: builtin or local (overrides embedding.provider).
    #[arg(long)]
    pub embedder: Option<String>,
    /// Local model directory (overrides embedding.model_dir).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Keep the evaluation's data directory.
    #[arg(long)]
    pub keep: bool,
    /// Turn a recall component off, for ablations (repeatable): vector, keyword, time,
    /// neighbours, feedback, speaker, rerank.
    #[arg(long = "without", value_parser = ["vector", "keyword", "time", "neighbours", "feedback", "entity", "speaker", "topic", "rerank"])]
    pub without: Vec<String>,
    /// Also write, as JSON lines, every turn's and question's embedding and each
    /// question's top 100 with per-retriever scores: material for offline analysis.
    #[arg(long)]
    pub dump: Option<PathBuf>,
}

/// One stored turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// `D<session>:<index>`.
    pub dia_id: String,
    /// `session_<N>`.
    pub session: String,
    /// Stored content.
    pub content: String,
    /// Session date-time.
    pub occurred_at: DateTime<Utc>,
}

/// One evaluated question.
#[derive(Debug, Clone)]
pub struct Question {
    /// The question text.
    pub text: String,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop.
    pub category: u8,
    /// Resolvable gold turn ids.
    pub evidence: Vec<String>,
}

/// A parsed sample.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Sample id.
    pub id: String,
    /// Turns in order.
    pub turns: Vec<Turn>,
    /// Questions kept by the protocol.
    pub questions: Vec<Question>,
}

/// Parse `"1:56 pm on 8 May, 2023"`.
pub fn parse_session_time(raw: &str) -> Option<DateTime<Utc>> {
    let (time, date) = raw.split_once(" on ")?;
    let time = NaiveTime::parse_from_str(&time.trim().to_uppercase(), "%I:%M %p").ok()?;
    let date = NaiveDate::parse_from_str(date.trim(), "%d %B, %Y").ok()?;
    Some(date.and_time(time).and_utc())
}

/// Split evidence strings defensively (`"D8:6; D9:17"`), keeping well-formed ids only.
pub fn parse_evidence(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .filter_map(Value::as_str)
        .flat_map(|s| {
            s.split([';', ','])
                .map(str::trim)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|id| {
            let Some(rest) = id.strip_prefix('D') else {
                return false;
            };
            let Some((session, turn)) = rest.split_once(':') else {
                return false;
            };
            !session.is_empty()
                && !turn.is_empty()
                && session.chars().all(|c| c.is_ascii_digit())
                && turn.chars().all(|c| c.is_ascii_digit())
        })
        .collect()
}

/// Parse the LoCoMo file.
pub fn parse_samples(json: &Value) -> anyhow::Result<Vec<Sample>> {
    let samples = json
        .as_array()
        .context("the LoCoMo file must hold a JSON list of samples")?;
    let mut parsed = Vec::new();
    for sample in samples {
        let id = sample["sample_id"].as_str().unwrap_or("sample").to_string();
        let conversation = &sample["conversation"];
        let mut sessions: Vec<(u32, String)> = conversation
            .as_object()
            .context("conversation must be an object")?
            .keys()
            .filter_map(|k| {
                k.strip_prefix("session_")
                    .and_then(|n| n.parse::<u32>().ok())
                    .map(|n| (n, k.clone()))
            })
            .collect();
        sessions.sort();
        let mut turns = Vec::new();
        for (number, key) in sessions {
            let Some(list) = conversation[&key].as_array() else {
                continue;
            };
            let when = conversation[format!("{key}_date_time")]
                .as_str()
                .and_then(parse_session_time)
                .with_context(|| format!("{id}: {key} has no readable date_time"))?;
            for turn in list {
                let (Some(speaker), Some(text), Some(dia_id)) = (
                    turn["speaker"].as_str(),
                    turn["text"].as_str(),
                    turn["dia_id"].as_str(),
                ) else {
                    continue;
                };
                let mut content = format!("{speaker}: {text}");
                if let Some(caption) = turn["blip_caption"].as_str() {
                    content.push_str(&format!(" [shares {caption}]"));
                }
                turns.push(Turn {
                    dia_id: dia_id.to_string(),
                    session: format!("session_{number}"),
                    content,
                    occurred_at: when,
                });
            }
        }
        let known: HashSet<&str> = turns.iter().map(|t| t.dia_id.as_str()).collect();
        let questions = sample["qa"]
            .as_array()
            .map(|qa| {
                qa.iter()
                    .filter_map(|q| {
                        let category = q["category"].as_u64()? as u8;
                        if !(1..=4).contains(&category) {
                            return None;
                        }
                        let evidence: Vec<String> = parse_evidence(q["evidence"].as_array()?)
                            .into_iter()
                            .filter(|e| known.contains(e.as_str()))
                            .collect();
                        (!evidence.is_empty()).then(|| Question {
                            text: q["question"].as_str().unwrap_or("").to_string(),
                            category,
                            evidence,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        parsed.push(Sample {
            id,
            turns,
            questions,
        });
    }
    Ok(parsed)
}

/// Scores of one ranked list against its gold turns.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct QuestionScore {
    /// Any gold turn in the top 5.
    pub any5: f64,
    /// In the top 10.
    pub any10: f64,
    /// In the top 20.
    pub any20: f64,
    /// All gold turns in the top 10.
    pub all10: f64,
    /// All gold turns in the top 20.
    pub all20: f64,
    /// nDCG@10, binary relevance.
    pub ndcg10: f64,
    /// The session of any gold turn among the sessions of the top 5.
    pub session_any5: f64,
}

fn session_of(dia_id: &str) -> &str {
    dia_id.split(':').next().unwrap_or(dia_id)
}

/// Score a ranking (pure).
pub fn score(ranked: &[String], gold: &[String]) -> QuestionScore {
    let gold_set: HashSet<&str> = gold.iter().map(String::as_str).collect();
    let any = |k: usize| {
        f64::from(u8::from(
            ranked.iter().take(k).any(|r| gold_set.contains(r.as_str())),
        ))
    };
    let all = |k: usize| {
        let top: HashSet<&str> = ranked.iter().take(k).map(String::as_str).collect();
        f64::from(u8::from(gold_set.iter().all(|g| top.contains(g))))
    };
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, r)| gold_set.contains(r.as_str()))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..gold_set.len().min(10))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let gold_sessions: HashSet<&str> = gold.iter().map(|g| session_of(g)).collect();
    let session_hit = ranked
        .iter()
        .take(5)
        .any(|r| gold_sessions.contains(session_of(r)));
    QuestionScore {
        any5: any(5),
        any10: any(10),
        any20: any(20),
        all10: all(10),
        all20: all(20),
        ndcg10: if ideal > 0.0 { dcg / ideal } else { 0.0 },
        session_any5: f64::from(u8::from(session_hit)),
    }
}

/// Mean scores of a group of questions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GroupScore {
    /// Questions in the group.
    pub questions: usize,
    /// Mean of each metric.
    pub mean: QuestionScore,
}

fn mean(scores: &[QuestionScore]) -> GroupScore {
    let n = scores.len().max(1) as f64;
    let sum = |f: fn(&QuestionScore) -> f64| scores.iter().map(f).sum::<f64>() / n;
    GroupScore {
        questions: scores.len(),
        mean: QuestionScore {
            any5: sum(|s| s.any5),
            any10: sum(|s| s.any10),
            any20: sum(|s| s.any20),
            all10: sum(|s| s.all10),
            all20: sum(|s| s.all20),
            ndcg10: sum(|s| s.ndcg10),
            session_any5: sum(|s| s.session_any5),
        },
    }
}

/// The evaluation's result.
#[derive(Debug, Clone, Serialize)]
pub struct LocomoReport {
    /// Embedding model.
    pub embedder: String,
    /// Overall scores.
    pub overall: GroupScore,
    /// Scores per category name.
    pub by_category: BTreeMap<String, GroupScore>,
    /// remember latency p50, ms.
    pub remember_p50_ms: f64,
    /// remember latency p95, ms.
    pub remember_p95_ms: f64,
    /// recall latency p50 (server-side), ms.
    pub recall_p50_ms: f64,
    /// recall latency p95 (server-side), ms.
    pub recall_p95_ms: f64,
    /// Mean time of each recall stage, ms, in the order recall reports them.
    pub recall_stage_means_ms: Vec<(String, f64)>,
}

fn category_name(category: u8) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        _ => "single-hop",
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(((p / 100.0) * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

/// Run the protocol and print the table.
pub async fn run_locomo(settings: &Settings, args: LocomoArgs, json: bool) -> anyhow::Result<()> {
    let report = evaluate(settings, &args).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("LoCoMo retrieval, embedder {}", report.embedder);
    println!("| group | n | any@5 | any@10 | all@10 | any@20 | session any@5 | nDCG@10 |");
    println!("|---|---|---|---|---|---|---|---|");
    let row = |name: &str, g: &GroupScore| {
        println!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            g.questions,
            g.mean.any5,
            g.mean.any10,
            g.mean.all10,
            g.mean.any20,
            g.mean.session_any5,
            g.mean.ndcg10
        );
    };
    row("overall", &report.overall);
    for (name, group) in &report.by_category {
        row(name, group);
    }
    println!(
        "remember p50 {:.2} ms, p95 {:.2} ms; recall p50 {:.2} ms, p95 {:.2} ms",
        report.remember_p50_ms, report.remember_p95_ms, report.recall_p50_ms, report.recall_p95_ms
    );
    let stages: Vec<String> = report
        .recall_stage_means_ms
        .iter()
        .map(|(stage, ms)| format!("{stage} {ms:.2}"))
        .collect();
    println!("recall stage means (ms): {}", stages.join(", "));
    Ok(())
}

/// Where `--dump` writes, and the embedder it embeds with.
struct Dump {
    /// The JSON-lines file.
    out: std::io::BufWriter<std::fs::File>,
    /// The same model the runtime embeds with.
    embedder: std::sync::Arc<dyn mnemos_actors::embedding::Embedder>,
}

impl Dump {
    /// One line per turn, then one per question with its top 100 and their components.
    async fn sample(
        &mut self,
        runtime: &mnemos_actors::runtime::Runtime,
        agent: &AgentId,
        sample: &Sample,
        id_to_dia: &HashMap<String, String>,
    ) -> anyhow::Result<()> {
        use std::io::Write;
        let embed = |texts: Vec<&str>| {
            self.embedder
                .embed_batch(&texts)
                .map_err(|e| anyhow::anyhow!(e.message))
        };
        let turn_vectors = embed(sample.turns.iter().map(|t| t.content.as_str()).collect())?;
        let question_vectors = embed(sample.questions.iter().map(|q| q.text.as_str()).collect())?;
        let mut lines = Vec::new();
        for (turn, vector) in sample.turns.iter().zip(turn_vectors) {
            lines.push(serde_json::json!({
                "kind": "turn", "sample": sample.id, "dia_id": turn.dia_id,
                "session": turn.session, "content": turn.content,
                "occurred_at": turn.occurred_at, "vector": vector,
            }));
        }
        for (question, vector) in sample.questions.iter().zip(question_vectors) {
            let outcome = runtime
                .recall(RecallInput {
                    limit: Some(100),
                    include_shared: false,
                    debug: true,
                    ..RecallInput::new(agent.clone(), question.text.clone())
                })
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
            let hits: Vec<Value> = outcome
                .hits
                .iter()
                .map(|h| {
                    serde_json::json!({
                        "dia_id": id_to_dia.get(&h.memory.id.0),
                        "score": h.score,
                        "components": h.components,
                    })
                })
                .collect();
            lines.push(serde_json::json!({
                "kind": "question", "sample": sample.id, "text": question.text,
                "category": question.category, "evidence": question.evidence,
                "vector": vector, "hits": hits,
            }));
        }
        for line in lines {
            serde_json::to_writer(&mut self.out, &line)?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()?;
        Ok(())
    }
}

/// Run the protocol and return the report.
pub async fn evaluate(settings: &Settings, args: &LocomoArgs) -> anyhow::Result<LocomoReport> {
    let raw = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let samples =
        parse_samples(&serde_json::from_str(&raw).context("the LoCoMo file is not JSON")?)?;
    let mut settings = settings.clone();
    if let Some(embedder) = &args.embedder {
        settings.embedding.provider = embedder.clone();
    }
    if let Some(dir) = &args.model_dir {
        settings.embedding.model_dir = dir.clone();
    }
    for component in &args.without {
        match component.as_str() {
            "vector" => settings.recall.vector_weight = 0.0,
            "keyword" => settings.recall.keyword_weight = 0.0,
            "time" => settings.recall.time_weight = 0.0,
            "neighbours" => settings.recall.neighbour_weight = 0.0,
            "feedback" => settings.recall.feedback_weight = 0.0,
            "entity" => settings.recall.entity_weight = 0.0,
            "speaker" => settings.recall.speaker_boost = 0.0,
            "topic" => settings.recall.topic_without_speakers = false,
            _ => settings.recall.rerank = false,
        }
    }
    settings.validate().map_err(|e| anyhow::anyhow!(e.0))?;
    let dir = std::env::temp_dir().join(format!("mnemos-eval-{}", uuid::Uuid::now_v7()));
    settings.data_dir = dir.clone();
    settings.cognition.enabled = false;
    let result = evaluate_in(&settings, &samples, args.dump.as_deref()).await;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

async fn evaluate_in(
    settings: &Settings,
    samples: &[Sample],
    dump: Option<&Path>,
) -> anyhow::Result<LocomoReport> {
    let services = Services::open_for_command(settings).await?;
    let mut dump = match dump {
        Some(path) => Some(Dump {
            out: std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            embedder: crate::embedding::from_settings(&settings.embedding)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?,
        }),
        None => None,
    };
    let runtime = services.runtime.clone();
    let mut remember_latencies = Vec::new();
    let mut recall_latencies = Vec::new();
    // Total time of each recall stage across the questions, by stage name.
    let mut stage_totals: Vec<(String, f64)> = Vec::new();
    let mut scores: Vec<(u8, QuestionScore)> = Vec::new();
    let steps: usize = samples
        .iter()
        .map(|s| s.turns.len() + s.questions.len())
        .sum();
    let bar = crate::telemetry::progress(steps as u64, "evaluating");
    for sample in samples {
        let agent = AgentId::parse(&format!(
            "locomo-{}",
            sample.id.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        ))
        .map_err(|e| anyhow::anyhow!(e.message))?;
        let mut id_to_dia: HashMap<String, String> = HashMap::new();
        for turn in &sample.turns {
            let input = RememberInput {
                content: turn.content.clone(),
                memory_type: Some(MemoryType::Episodic),
                session_id: SessionId::parse(&turn.session).ok(),
                occurred_at: Some(turn.occurred_at),
                metadata: Some(serde_json::json!({ "dia_id": turn.dia_id })),
                ..Default::default()
            };
            let started = Instant::now();
            let outcome = runtime
                .remember(&agent, input)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
            remember_latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            bar.inc(1);
            id_to_dia.insert(outcome.memory.id.0, turn.dia_id.clone());
        }
        // The entity index follows the outbox: the questions wait until it holds the
        // conversation, as they would after any pause in a real one.
        crate::bench::drain_projections(&runtime).await?;
        for question in &sample.questions {
            let outcome = runtime
                .recall(RecallInput {
                    limit: Some(20),
                    include_shared: false,
                    ..RecallInput::new(agent.clone(), question.text.clone())
                })
                .await
                .map_err(|e| anyhow::anyhow!("{}: {}", question.text, e.message))?;
            recall_latencies.push(outcome.took_ms);
            bar.inc(1);
            for (stage, ms) in &outcome.timings_ms {
                match stage_totals.iter_mut().find(|(name, _)| name == stage) {
                    Some((_, total)) => *total += ms,
                    None => stage_totals.push(((*stage).to_string(), *ms)),
                }
            }
            let ranked: Vec<String> = outcome
                .hits
                .iter()
                .filter_map(|h| {
                    h.memory.metadata["dia_id"]
                        .as_str()
                        .map(str::to_string)
                        .or_else(|| id_to_dia.get(&h.memory.id.0).cloned())
                })
                .collect();
            scores.push((question.category, score(&ranked, &question.evidence)));
        }
        if let Some(dump) = dump.as_mut() {
            dump.sample(&runtime, &agent, sample, &id_to_dia).await?;
        }
    }
    bar.finish_and_clear();
    let embedder = services.embedder_model().await;
    services.close().await?;
    let mut by_category = BTreeMap::new();
    for category in 1..=4u8 {
        let group: Vec<QuestionScore> = scores
            .iter()
            .filter(|(c, _)| *c == category)
            .map(|(_, s)| *s)
            .collect();
        by_category.insert(category_name(category).to_string(), mean(&group));
    }
    remember_latencies.sort_by(f64::total_cmp);
    recall_latencies.sort_by(f64::total_cmp);
    let all: Vec<QuestionScore> = scores.iter().map(|(_, s)| *s).collect();
    Ok(LocomoReport {
        embedder,
        overall: mean(&all),
        by_category,
        remember_p50_ms: percentile(&remember_latencies, 50.0),
        remember_p95_ms: percentile(&remember_latencies, 95.0),
        recall_p50_ms: percentile(&recall_latencies, 50.0),
        recall_p95_ms: percentile(&recall_latencies, 95.0),
        recall_stage_means_ms: stage_totals
            .into_iter()
            .map(|(stage, total)| (stage, total / recall_latencies.len().max(1) as f64))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_session_times() {
        let t = parse_session_time("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(t.to_rfc3339(), "2023-05-08T13:56:00+00:00");
        assert_eq!(
            parse_session_time("12:05 am on 25 December, 2022")
                .unwrap()
                .to_rfc3339(),
            "2022-12-25T00:05:00+00:00"
        );
        assert!(parse_session_time("yesterday").is_none());
    }

    #[test]
    fn evidence_is_parsed_defensively() {
        let values = vec![
            Value::from("D1:3"),
            Value::from("D8:6; D9:17"),
            Value::from("D:11:26"),
            Value::from("D2"),
        ];
        assert_eq!(parse_evidence(&values), vec!["D1:3", "D8:6", "D9:17"]);
    }

    #[test]
    fn scores_follow_the_protocol() {
        let ranked: Vec<String> = ["D1:1", "D2:5", "D1:2", "D3:1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let gold = vec!["D1:2".to_string(), "D3:1".to_string()];
        let s = score(&ranked, &gold);
        assert_eq!(s.any5, 1.0);
        assert_eq!(s.all10, 1.0);
        assert_eq!(s.session_any5, 1.0);
        let ideal = 1.0 + 1.0 / 3f64.log2();
        let dcg = 1.0 / 4f64.log2() + 1.0 / 5f64.log2();
        assert!((s.ndcg10 - dcg / ideal).abs() < 1e-9);
        let miss = score(&ranked, &["D9:9".to_string()]);
        assert_eq!(miss.any20, 0.0);
        assert_eq!(miss.ndcg10, 0.0);
    }
}
