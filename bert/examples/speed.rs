//! Time the encoder alone on a model directory, with token ids drawn at random
//! (no tokenizer): `cargo run --release -p mnemos-bert --example speed -- DIR [TOKENS
//! [QUERY]]`. Prints tokens per second for batches of 200 sequences of TOKENS (default
//! 30) tokens and the median time of one QUERY-token (default 12) sequence, on the
//! current thread. `MNEMOS_BERT_INT8=1` quantizes the linear layers first (where the CPU
//! has VNNI) and also prints how far each sequence's mean-pooled vector moved from the
//! float32 pass (the smallest cosine over the batch).

use std::collections::HashMap;
use std::time::Instant;

use mnemos_bert::{BertConfig, BertEncoder, Sequence, Weight};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: speed MODEL_DIR [TOKENS]"));
    let length: usize = args
        .next()
        .map_or(30, |n| n.parse().expect("TOKENS is a number"));
    let query_length: usize = args
        .next()
        .map_or(12, |n| n.parse().expect("QUERY is a number"));
    let config: BertConfig =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let mut encoder = BertEncoder::load(&config, read_safetensors(&dir.join("model.safetensors")))
        .expect("load the model");
    let float = std::env::var("MNEMOS_BERT_INT8")
        .is_ok_and(|v| v == "1")
        .then(|| {
            BertEncoder::load(&config, read_safetensors(&dir.join("model.safetensors")))
                .expect("load the model")
        });
    let mut seed = 1u64;
    let mut sequence = |len: usize| -> Vec<u32> {
        (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                1000 + ((seed >> 33) % 20000) as u32
            })
            .collect()
    };
    let batch: Vec<Vec<u32>> = (0..200).map(|_| sequence(length)).collect();
    let zeros = vec![0u32; 512];
    if float.is_some() {
        let calibration: Vec<Vec<u32>> = (0..32).map(|_| sequence(length)).collect();
        let calibration = as_sequences(&zeros, &calibration);
        println!("int8: {:?}", encoder.quantize_int8(&calibration));
    }
    encoder
        .forward(&as_sequences(&zeros, &batch[..2]), false)
        .unwrap();
    if let Some(float) = &float {
        let sequences = as_sequences(&zeros, &batch);
        let (a, b) = (
            encoder.forward(&sequences, false).unwrap(),
            float.forward(&sequences, false).unwrap(),
        );
        let hidden = encoder.hidden_size();
        let pooled = |x: &[f32], i: usize| -> Vec<f32> {
            let mut v = vec![0.0f32; hidden];
            for token in x[i * length * hidden..(i + 1) * length * hidden].chunks_exact(hidden) {
                v.iter_mut().zip(token).for_each(|(v, t)| *v += t);
            }
            v
        };
        let worst = (0..batch.len())
            .map(|i| {
                let (p, q) = (pooled(&a, i), pooled(&b, i));
                let dot: f32 = p.iter().zip(&q).map(|(x, y)| x * y).sum();
                let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
                dot / (norm(&p) * norm(&q))
            })
            .fold(1.0f32, f32::min);
        println!("smallest cosine to float32 over the batch: {worst:.6}");
    }
    let started = Instant::now();
    let rounds = 3;
    for _ in 0..rounds {
        encoder
            .forward(&as_sequences(&zeros, &batch), false)
            .unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    let texts = (rounds * batch.len()) as f64;
    println!(
        "batch: {:.1} sequences/s of {length} tokens ({:.0} tokens/s)",
        texts / seconds,
        texts * length as f64 / seconds
    );
    let query = vec![sequence(query_length)];
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let started = Instant::now();
            encoder
                .forward(&as_sequences(&zeros, &query), false)
                .unwrap();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "one {query_length}-token sequence: p50 {:.2} ms",
        times[times.len() / 2]
    );
}

/// The tensors of a safetensors file as float32 (F32, F16 and BF16 are read).
fn read_safetensors(path: &std::path::Path) -> HashMap<String, Weight> {
    let bytes = std::fs::read(path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let data = &bytes[8 + header_len..];
    let mut out = HashMap::new();
    for (name, info) in header {
        if name == "__metadata__" {
            continue;
        }
        let shape: Vec<usize> = serde_json::from_value(info["shape"].clone()).unwrap();
        let offsets: Vec<usize> = serde_json::from_value(info["data_offsets"].clone()).unwrap();
        let raw = &data[offsets[0]..offsets[1]];
        let values: Vec<f32> = match info["dtype"].as_str().unwrap() {
            "F32" => raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            "BF16" => raw
                .chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            _ => continue,
        };
        out.insert(name, Weight { shape, values });
    }
    out
}

/// Borrow rows of ids as sequences of one segment.
fn as_sequences<'a>(zeros: &'a [u32], rows: &'a [Vec<u32>]) -> Vec<Sequence<'a>> {
    rows.iter()
        .map(|ids| Sequence {
            ids,
            type_ids: &zeros[..ids.len()],
        })
        .collect()
}
