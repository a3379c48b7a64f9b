//! `mnemos embedder`: distil a static embedding table from a sentence-transformers model.

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
