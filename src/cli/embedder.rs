//! `mnemos embedder`: distil a static embedding table from a sentence-transformers model,
//! and time a local model (`speed`).

use std::path::PathBuf;

use mnemos::embedding::distill::{distill as distill_table, DistillOptions, TokenPooling};
use mnemos::embedding::static_table::StaticEmbedder;
use mnemos_actors::embedding::Embedder;

use super::{print, user_error};

/// Arguments of `mnemos embedder distill`.
#[derive(clap::Args)]
pub(crate) struct DistillArgs {
    /// The sentence-transformers BERT model directory (model.safetensors, tokenizer.json, config.json).
    #[arg(long)]
    model_dir: PathBuf,
    /// Where the table is written.
    #[arg(long)]
    out: PathBuf,
    /// Components kept by PCA.
    #[arg(long, default_value_t = DistillOptions::default().dimension)]
    dimension: usize,
    /// Smooth-inverse-frequency coefficient (0: no frequency weighting).
    #[arg(long, default_value_t = DistillOptions::default().sif)]
    sif: f64,
    /// How a token's outputs are pooled: mean ([CLS], token, [SEP]) or own (the token's position).
    #[arg(long, default_value = "own")]
    pooling: String,
    /// Divide each component by its standard deviation to this power (0: plain PCA).
    #[arg(long, default_value_t = 0.0)]
    whiten: f64,
}

/// Distil, write the table, and print what was made.
pub(crate) fn distill(args: DistillArgs, json: bool) -> anyhow::Result<()> {
    let pooling = match args.pooling.as_str() {
        "mean" => TokenPooling::Mean,
        "own" => TokenPooling::Own,
        other => anyhow::bail!("--pooling: {other:?} is not one of mean, own"),
    };
    let options = DistillOptions {
        dimension: args.dimension,
        sif: args.sif,
        pooling,
        whiten: args.whiten,
        ..DistillOptions::default()
    };
    let bar = mnemos::telemetry::progress(0, "distilling");
    let started = std::time::Instant::now();
    let table = distill_table(&args.model_dir, &options, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
    .map_err(user_error)?;
    bar.finish_and_clear();
    let bytes = table.to_bytes();
    std::fs::write(&args.out, &bytes)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    let embedder =
        StaticEmbedder::from_bytes(&bytes, &args.out.display().to_string()).map_err(user_error)?;
    print(
        json,
        &serde_json::json!({
            "out": args.out,
            "bytes": bytes.len(),
            "model_id": embedder.model_id(),
            "dimension": embedder.dimension(),
            "source": embedder.source(),
            "seconds": started.elapsed().as_secs_f64(),
        }),
        |v| {
            format!(
                "wrote {} ({} bytes, {} dimensions) in {:.1} s: model {}\n{}",
                args.out.display(),
                v["bytes"],
                v["dimension"],
                v["seconds"].as_f64().unwrap_or_default(),
                embedder.model_id(),
                embedder.source()
            )
        },
    );
    Ok(())
}

/// Arguments of `mnemos embedder speed`.
#[derive(clap::Args)]
pub(crate) struct SpeedArgs {
    /// The sentence-transformers BERT model directory (model.safetensors, tokenizer.json, config.json).
    #[arg(long)]
    model_dir: PathBuf,
    /// A LoCoMo file (its turns are the stored texts, its questions the queries) or a
    /// text file of one text per line (used for both).
    #[arg(long)]
    texts: PathBuf,
    /// Threads of a forward pass (`embedding.threads`; 0: every core).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Texts per `embed_batch` call.
    #[arg(long, default_value_t = 200)]
    batch: usize,
    /// Texts embedded in batches at most.
    #[arg(long, default_value_t = 2000)]
    limit: usize,
    /// Queries embedded one at a time at most.
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// `float32`, or `int8` (the linear layers in 8 bits, on CPUs with VNNI), which also
    /// reports how close every text's and query's vector is to float32's.
    #[arg(long, default_value = "float32", value_parser = ["float32", "int8"])]
    precision: String,
}

/// Time the local model: batched throughput of stored texts and single-query latency.
pub(crate) fn speed(args: SpeedArgs, json: bool) -> anyhow::Result<()> {
    let raw = std::fs::read_to_string(&args.texts)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.texts.display()))?;
    let (mut texts, mut queries): (Vec<String>, Vec<String>) =
        match serde_json::from_str::<serde_json::Value>(&raw) {
            Ok(value) => {
                let samples = mnemos::eval::parse_samples(&value)?;
                let turns = samples.iter().flat_map(|s| &s.turns);
                let questions = samples.iter().flat_map(|s| &s.questions);
                (
                    turns.map(|t| t.content.clone()).collect(),
                    questions.map(|q| q.text.clone()).collect(),
                )
            }
            Err(_) => {
                let lines: Vec<String> = raw
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string)
                    .collect();
                (lines.clone(), lines)
            }
        };
    texts.truncate(args.limit);
    queries.truncate(args.queries);
    anyhow::ensure!(!texts.is_empty(), "{} holds no texts", args.texts.display());
    let load = || -> anyhow::Result<mnemos::embedding::local::LocalEmbedder> {
        mnemos::embedding::local::LocalEmbedder::load(&args.model_dir)
            .map_err(user_error)?
            .with_threads(args.threads)
            .map_err(user_error)
    };
    let embedder = load()?;
    let (embedder, agreement) = if args.precision == "int8" {
        let (embedder, quantized) = embedder.with_int8().map_err(user_error)?;
        anyhow::ensure!(
            quantized,
            "this CPU has no VNNI: the int8 layers cannot run here"
        );
        let float = load()?;
        let mut cosines = Vec::with_capacity(texts.len() + queries.len());
        let mut farthest: Vec<(f64, &str)> = Vec::new();
        for (items, query) in [(&texts, false), (&queries, true)] {
            for batch in items.chunks(args.batch.max(1)) {
                let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
                let embed = |model: &mnemos::embedding::local::LocalEmbedder| {
                    if query {
                        model.embed_queries(&refs)
                    } else {
                        model.embed_batch(&refs)
                    }
                };
                let (a, b) = (
                    embed(&embedder).map_err(user_error)?,
                    embed(&float).map_err(user_error)?,
                );
                let dots = a
                    .iter()
                    .zip(&b)
                    .map(|(a, b)| mnemos_actors::embedding::dot(a, b));
                farthest.extend(
                    dots.clone()
                        .zip(batch)
                        .map(|(c, t)| (f64::from(c), t.as_str())),
                );
                cosines.extend(dots.map(f64::from));
            }
        }
        cosines.sort_by(f64::total_cmp);
        farthest.sort_by(|a, b| a.0.total_cmp(&b.0));
        farthest.truncate(3);
        let mean = cosines.iter().sum::<f64>() / cosines.len().max(1) as f64;
        let low = |p: f64| {
            cosines
                .get(((cosines.len() as f64 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or_default()
        };
        let within = cosines.iter().filter(|c| **c >= 0.999).count();
        (
            embedder,
            Some(serde_json::json!({
                "vectors": cosines.len(),
                "min": low(0.0),
                "p01": low(0.01),
                "mean": mean,
                "within_1e-3": within,
            "farthest": farthest
                .iter()
                .map(|(cosine, text)| serde_json::json!({"cosine": cosine, "text": text}))
                .collect::<Vec<_>>(),
            })),
        )
    } else {
        (embedder, None)
    };
    // One warm-up call, so first-touch page faults are not timed.
    embedder
        .embed_batch(&[texts[0].as_str()])
        .map_err(user_error)?;
    let started = std::time::Instant::now();
    for batch in texts.chunks(args.batch.max(1)) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        embedder.embed_batch(&refs).map_err(user_error)?;
    }
    let batch_seconds = started.elapsed().as_secs_f64();
    let mut latencies: Vec<f64> = Vec::with_capacity(queries.len());
    for query in &queries {
        let started = std::time::Instant::now();
        embedder
            .embed_queries(&[query.as_str()])
            .map_err(user_error)?;
        latencies.push(started.elapsed().as_secs_f64() * 1e3);
    }
    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    print(
        json,
        &serde_json::json!({
            "model_id": embedder.model_id(),
            "threads": args.threads,
            "texts": texts.len(),
            "batch": args.batch,
            "texts_per_second": texts.len() as f64 / batch_seconds,
            "queries": latencies.len(),
            "query_p50_ms": at(0.5),
            "query_p95_ms": at(0.95),
            "precision": args.precision,
            "cosine_to_float32": agreement,
        }),
        |v| {
            let agreement = match v["cosine_to_float32"].as_object() {
                Some(c) => format!(
                    "; cosine to float32 over {} vectors: min {:.5}, p01 {:.5}, mean {:.6}, {} within 1e-3",
                    c["vectors"], c["min"].as_f64().unwrap_or_default(), c["p01"].as_f64().unwrap_or_default(),
                    c["mean"].as_f64().unwrap_or_default(), c["within_1e-3"]
                ),
                None => String::new(),
            };
            format!(
                "{} ({}): {} texts in batches of {} on {} thread(s): {:.1} texts/s; {} queries one at a time: p50 {:.2} ms, p95 {:.2} ms{agreement}",
                v["model_id"].as_str().unwrap_or_default(),
                v["precision"].as_str().unwrap_or_default(),
                v["texts"],
                v["batch"],
                v["threads"],
                v["texts_per_second"].as_f64().unwrap_or_default(),
                v["queries"],
                v["query_p50_ms"].as_f64().unwrap_or_default(),
                v["query_p95_ms"].as_f64().unwrap_or_default(),
            )
        },
    );
    Ok(())
}
