//! `kill -9` of a server process during 2,000 concurrent remembers: after a restart on
//! the same data directory every acknowledged id is readable, and the FalkorDB
//! projection converges to what SQL holds (the outbox entries committed with the
//! writes survive the crash).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use mnemos::graph::falkordb::FalkorProjection;
use mnemos_actors::model::AgentId;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::falkordb::{falkor_or_skip, free_port, Falkor};
use crate::helpers::*;

/// A `mnemos serve` child process, killed on drop.
struct Server {
    child: Child,
    address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_server(data_dir: &std::path::Path, graph_url: &str) -> Server {
    let client = reqwest::Client::new();
    for _attempt in 0..3 {
        let port = free_port();
        let log = std::fs::File::create(data_dir.join(format!("server-{port}.log"))).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mnemos"))
            .arg("serve")
            .env("MNEMOS__DATA_DIR", data_dir)
            .envs(backend_env(data_dir))
            .env("MNEMOS__SERVER__BIND", format!("127.0.0.1:{port}"))
            .env("MNEMOS__COGNITION__ENABLED", "false")
            .env("MNEMOS__GRAPH__BACKEND", "falkordb")
            .env("MNEMOS__GRAPH__URL", graph_url)
            .env("MNEMOS__GRAPH__NAME", "crash")
            .env("MNEMOS__PROJECTOR__INTERVAL_MS", "50")
            .env("MNEMOS__LOG__LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("mnemos binary starts");
        let address = format!("http://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            if client.get(format!("{address}/health")).send().await.is_ok()
                && child.try_wait().ok().flatten().is_none()
            {
                return Server { child, address };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("mnemos serve did not start; logs in {}", data_dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_2000_concurrent_remembers_loses_no_acknowledged_write() {
    let test = "kill_9_during_2000_concurrent_remembers_loses_no_acknowledged_write";
    let Some(bin) = falkor_or_skip(test).await else {
        return;
    };
    let falkor = Falkor::start(&bin, free_port()).await;
    let temp = tempfile::tempdir().unwrap();
    let mut server = start_server(temp.path(), &falkor.url()).await;
    let client = reqwest::Client::new();
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (client, address) = (client.clone(), server.address.clone());
        let (acknowledged, next) = (acknowledged.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= 2000 {
                    return;
                }
                let sent = client
                    .post(format!("{address}/tools/remember"))
                    .json(&json!({"agent_id": "crash", "content": format!("event {i}: sensor {i} reported"), "session_id": format!("s{}", i % 7)}))
                    .send()
                    .await;
                // After the kill, requests fail: those were never acknowledged.
                let Ok(response) = sent else { return };
                if response.status() != StatusCode::CREATED {
                    return;
                }
                let Ok(body) = response.json::<Value>().await else { return };
                if let Some(id) = body["memory"]["id"].as_str() {
                    acknowledged.lock().unwrap().push(id.to_string());
                }
            }
        }));
    }
    // Kill -9 once a good part of the writes is acknowledged.
    let progressed = eventually(Duration::from_secs(120), || async {
        acknowledged.lock().unwrap().len() >= 600
    })
    .await;
    assert!(progressed, "the server did not acknowledge 600 writes");
    server.child.kill().expect("SIGKILL"); // std's kill() is SIGKILL on Unix
    let _ = server.child.wait();
    for worker in workers {
        let _ = worker.await;
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 600 && acknowledged.len() < 2000,
        "{}",
        acknowledged.len()
    );

    let server = start_server(temp.path(), &falkor.url()).await;
    for id in &acknowledged {
        let response = client
            .get(format!(
                "{}/v1/memories/{id}?agent_id=crash",
                server.address
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "acknowledged {id} was lost"
        );
    }
    // Everything SQL holds (acknowledged or committed just before the kill) reaches the graph.
    let stored = client
        .post(format!("{}/tools/reflect", server.address))
        .json(&json!({"agent_id": "crash"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let total = stored["total"]
        .as_i64()
        .expect("reflect counts every memory");
    // Near-duplicate texts answer with the memory they duplicate: count distinct ids.
    let distinct: std::collections::HashSet<&String> = acknowledged.iter().collect();
    assert!(
        total as usize >= distinct.len(),
        "{total} < {}",
        distinct.len()
    );
    let graph = FalkorProjection::new(&falkor.url(), "crash", Duration::from_secs(5)).unwrap();
    let agent = AgentId::parse("crash").unwrap();
    let converged = eventually(Duration::from_secs(60), || async {
        let Ok((nodes, _)) = graph.counts(&agent).await else {
            return false;
        };
        nodes == total
    })
    .await;
    assert!(
        converged,
        "graph {:?} vs SQL {stored}",
        graph.counts(&agent).await
    );
}
